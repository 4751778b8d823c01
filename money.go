package gpuportal

import (
	"fmt"
	"strconv"
	"strings"
)

// Fen is an amount of money in fen (CNY × 100). Money is never a float.
type Fen int64

// String formats the amount as yuan with two decimals, e.g. "¥1,234.50"
// and "-¥8.00".
func (f Fen) String() string {
	sign := ""
	v := int64(f)
	if v < 0 {
		sign = "-"
		v = -v
	}
	return fmt.Sprintf("%s¥%s.%02d", sign, groupThousands(v/100), v%100)
}

// Decimal is the amount as a form's yuan field takes it ("1234.50").
func (f Fen) Decimal() string {
	sign := ""
	v := int64(f)
	if v < 0 {
		sign, v = "-", -v
	}
	return fmt.Sprintf("%s%d.%02d", sign, v/100, v%100)
}

func groupThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	lead := len(s) % 3
	if lead > 0 {
		b.WriteString(s[:lead])
	}
	for i := lead; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// ParseYuan parses a user-entered yuan amount such as "8", "8.5" or
// "20.00" into fen. At most two decimals; negative amounts are refused.
func ParseYuan(s string) (Fen, error) {
	s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "¥"))
	whole, frac, hasFrac := strings.Cut(s, ".")
	if whole == "" || (hasFrac && (frac == "" || len(frac) > 2)) {
		return 0, Errorf(EINVALID, "%q is not an amount in yuan (like 8.50).", s)
	}
	for _, part := range []string{whole, frac} {
		for _, r := range part {
			if r < '0' || r > '9' {
				return 0, Errorf(EINVALID, "%q is not an amount in yuan (like 8.50).", s)
			}
		}
	}
	if len(whole) > 12 {
		return 0, Errorf(EINVALID, "%q is too large.", s)
	}
	w, _ := strconv.ParseInt(whole, 10, 64)
	var fr int64
	if hasFrac {
		if len(frac) == 1 {
			frac += "0"
		}
		fr, _ = strconv.ParseInt(frac, 10, 64)
	}
	return Fen(w*100 + fr), nil
}
