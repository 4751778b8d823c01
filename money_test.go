package gpuportal

import "testing"

func TestFenString(t *testing.T) {
	for _, tt := range []struct {
		in   Fen
		want string
	}{
		{0, "¥0.00"}, {5, "¥0.05"}, {800, "¥8.00"}, {123450, "¥1,234.50"},
		{100000000, "¥1,000,000.00"}, {-800, "-¥8.00"},
	} {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Fen(%d).String() = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseYuan(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Fen
		ok   bool
	}{
		{"8", 800, true}, {"8.5", 850, true}, {"20.00", 2000, true}, {"¥ 3.07", 307, true}, {" 0.01 ", 1, true},
		{"", 0, false}, {"8.", 0, false}, {".5", 0, false}, {"8.123", 0, false}, {"-1", 0, false},
		{"1e3", 0, false}, {"abc", 0, false}, {"9999999999999", 0, false},
	} {
		got, err := ParseYuan(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseYuan(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestSpotPrice(t *testing.T) {
	if got := SpotPrice(800, 70); got != 240 {
		t.Errorf("SpotPrice(800, 70) = %d; want 240", got)
	}
	if got := SpotPrice(2001, 70); got != 600 { // 600.3 rounds down
		t.Errorf("SpotPrice(2001, 70) = %d; want 600", got)
	}
}
