package gpuportal

// Model is a GPU model that can be rented, e.g. "a100-80g".
type Model struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	MemoryGiB int    `json:"memory_gib"`
	// ListPrice is the on-demand price of one GPU for one hour.
	ListPrice Fen `json:"list_price_per_gpu_hour_fen"`
}

// Region is a site/zone; every node belongs to one.
type Region struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	TimeZone string `json:"time_zone"`
}

// MaxListPrice bounds what an admin can set as a list price per GPU-hour
// (¥100,000) so a typo cannot produce absurd bills or overflow totals.
const MaxListPrice Fen = 100_000_00

// ValidateListPrice checks a list price an admin wants to set.
func ValidateListPrice(p Fen) error {
	if p <= 0 {
		return FieldErrorf(EINVALID, "list_price_per_gpu_hour_fen", "The list price must be more than zero.")
	}
	if p > MaxListPrice {
		return FieldErrorf(EINVALID, "list_price_per_gpu_hour_fen", "The list price must be at most %s per GPU-hour.", MaxListPrice)
	}
	return nil
}
