package gpuportal

// DefaultSpotDiscountPercent is the spot discount when no policy says
// otherwise (DESIGN §2: 70 % off list).
const DefaultSpotDiscountPercent = 70

// SpotPrice is the list price less the spot discount, rounded down to whole
// fen in the customer's favour.
func SpotPrice(list Fen, discountPercent int) Fen {
	return list * Fen(100-discountPercent) / 100
}
