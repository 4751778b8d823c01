package gpuportal

import "testing"

func TestHourPrice(t *testing.T) {
	m := Model{ID: "h100-80g", ListPrice: 3000}
	p := DefaultPolicy()
	p.SpotDiscountPercent = 75
	for _, c := range []struct {
		kind InstanceKind
		want Fen
	}{
		{KindSpot, 750},
		{KindOnDemand, 3000},
		{KindReserved, 0},
	} {
		if got := p.HourPrice(m, c.kind); got != c.want {
			t.Errorf("HourPrice(%s) = %s, want %s", c.kind, got, c.want)
		}
	}
}
