package gpuportal

import "testing"

func TestFreeInHourAndFitsInHour(t *testing.T) {
	tests := []struct {
		name                      string
		capacity, reserved, count int
		free                      int
		fits                      bool
	}{
		{"empty hour", 8, 0, 8, 8, true},
		{"the last GPUs", 8, 6, 2, 2, true},
		{"one too many", 8, 6, 3, 2, false},
		{"full", 8, 8, 1, 0, false},
		{"booked over a capacity that shrank", 6, 8, 1, 0, false},
		{"no GPUs at all", 0, 0, 1, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FreeInHour(tt.capacity, tt.reserved); got != tt.free {
				t.Errorf("FreeInHour(%d, %d) = %d, want %d", tt.capacity, tt.reserved, got, tt.free)
			}
			if got := FitsInHour(tt.capacity, tt.reserved, tt.count); got != tt.fits {
				t.Errorf("FitsInHour(%d, %d, %d) = %v, want %v", tt.capacity, tt.reserved, tt.count, got, tt.fits)
			}
		})
	}
}

func TestBookableGPUs(t *testing.T) {
	tests := []struct{ healthy, percent, want int }{
		{16, 100, 16},
		{16, 75, 12},
		{10, 75, 7}, // rounded down: a share of a GPU cannot be booked
		{0, 75, 0},
		{16, 0, 0},
	}
	for _, tt := range tests {
		if got := BookableGPUs(tt.healthy, tt.percent); got != tt.want {
			t.Errorf("BookableGPUs(%d, %d) = %d, want %d", tt.healthy, tt.percent, got, tt.want)
		}
	}
}

func TestOnDemandFits(t *testing.T) {
	tests := []struct {
		name                                  string
		bookable, onDemand, count, mostBooked int
		want                                  bool
	}{
		{"idle pool", 16, 0, 8, 0, true},
		{"beside the busiest booked hour", 16, 4, 4, 8, true},
		{"would take a booked hour's GPUs", 16, 4, 5, 8, false},
		{"a booking days ahead counts too", 16, 0, 9, 8, false},
		{"already over (a pending launch placed: count 0)", 16, 10, 0, 8, false},
	}
	for _, tt := range tests {
		if got := OnDemandFits(tt.bookable, tt.onDemand, tt.count, tt.mostBooked); got != tt.want {
			t.Errorf("%s: OnDemandFits(%d, %d, %d, %d) = %v, want %v", tt.name, tt.bookable, tt.onDemand, tt.count, tt.mostBooked, got, tt.want)
		}
	}
}

func TestMostFree(t *testing.T) {
	tests := []struct {
		free []int
		want int
	}{
		{nil, 0},
		{[]int{4}, 4},
		{[]int{6, 2, 5}, 2},
		{[]int{3, 0, 3}, 0},
	}
	for _, tt := range tests {
		if got := MostFree(tt.free); got != tt.want {
			t.Errorf("MostFree(%v) = %d, want %d", tt.free, got, tt.want)
		}
	}
}

func TestShortfallCauseText(t *testing.T) {
	for cause, want := range map[string]string{
		ShortNodeFailure:     "node failure",
		ShortOutOfService:    "GPUs out of service",
		ShortStillInUse:      "GPUs still in use by other instances",
		ShortCauseUnknownGPU: "no GPUs of this model in the region",
	} {
		if got := ShortfallCauseText(cause); got != want {
			t.Errorf("ShortfallCauseText(%q) = %q, want %q", cause, got, want)
		}
	}
}
