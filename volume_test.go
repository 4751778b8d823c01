package gpuportal

import (
	"testing"
	"time"
)

func TestVolumeHourCost(t *testing.T) {
	// 100 GiB at 30 fen per GiB-month for 24 hours is exactly 100 fen:
	// the fractions of a fen carry from hour to hour.
	var total Fen
	var carry int64
	for range 24 {
		var c Fen
		c, carry = VolumeHourCost(100, 30, carry)
		total += c
	}
	if total != 100 || carry != 0 {
		t.Errorf("a day of 100 GiB = %d fen (carry %d), want 100", total, carry)
	}
	for _, c := range []struct {
		size  int
		price Fen
		hours int
		want  Fen
	}{
		{1, 30, 720, 30},   // a GiB for a month
		{2048, 30, 1, 85},  // the default quota for an hour (85.33)
		{1000, 0, 100, 0},  // free storage
		{10, 30, 1, 0},     // under a fen an hour: nothing yet…
		{10, 30, 720, 300}, // …but a month is ¥3.00
		{100, 720, 1, 100}, // a fen per GiB-hour
	} {
		var total Fen
		var carry int64
		for range c.hours {
			var fen Fen
			fen, carry = VolumeHourCost(c.size, c.price, carry)
			total += fen
		}
		if total != c.want {
			t.Errorf("%d GiB at %d for %d h = %d, want %d", c.size, c.price, c.hours, total, c.want)
		}
	}
	if got := VolumeCostPerHour(100, 30); got != 5 {
		t.Errorf("shown per hour = %d, want 5 (4.17 rounded up)", got)
	}
}

func TestVolumeDeletion(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		after        time.Duration
		warned       bool
		delete, warn bool
	}{
		{time.Hour, false, false, false},
		{11 * 24 * time.Hour, false, false, false},
		{12 * 24 * time.Hour, false, false, true}, // 3 days before
		{13 * 24 * time.Hour, true, false, false}, // once
		{15*24*time.Hour - time.Second, true, false, false},
		{15 * 24 * time.Hour, true, true, false},
		{15 * 24 * time.Hour, false, true, false}, // deleted even if the warning was missed
	} {
		d, w := VolumeDeletion(at, at.Add(c.after), c.warned)
		if d != c.delete || w != c.warn {
			t.Errorf("after %v (warned %v): delete %v warn %v, want %v %v", c.after, c.warned, d, w, c.delete, c.warn)
		}
	}
}

func TestCleanVolumePath(t *testing.T) {
	for in, want := range map[string]string{"": ".", ".": ".", "/": ".", "a": "a", "a/b/": "a/b", "a//b": "a/b", "./a": "a", "a/./b": "a/b"} {
		if got, err := CleanVolumePath(in); err != nil || got != want {
			t.Errorf("CleanVolumePath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"..", "../x", "a/../../x", "a/..", "/etc/passwd", "a\\b", "a\x00b"} {
		if _, err := CleanVolumePath(bad); ErrorCode(err) != EINVALID || ErrorField(err) != "path" {
			t.Errorf("CleanVolumePath(%q) = %v, want invalid path", bad, err)
		}
	}
}

func TestResolveMountPath(t *testing.T) {
	if got, err := ResolveMountPath("", "data", "f"); err != nil || got != "/data/data" {
		t.Errorf("default = %q %v", got, err)
	}
	if got, err := ResolveMountPath("/mnt/ds", "data", "f"); err != nil || got != "/mnt/ds" {
		t.Errorf("asked = %q %v", got, err)
	}
	for _, bad := range []string{"data", "/", "/checkpoint", "/checkpoint/x", "/etc", "/usr/lib", "/data/../etc", "/data/", "/a:b", "/.gpuportal/x"} {
		if _, err := ResolveMountPath(bad, "data", "volumes[0].mount_path"); ErrorField(err) != "volumes[0].mount_path" {
			t.Errorf("ResolveMountPath(%q) = %v, want refused", bad, err)
		}
	}
}

func TestVolumeRequestValidate(t *testing.T) {
	ok := VolumeRequest{Name: "datasets-2026.v1", Region: "cd-1", SizeGiB: 100}
	if err := ok.Validate(2048, 0); err != nil {
		t.Errorf("valid request: %v", err)
	}
	for _, c := range []struct {
		req         VolumeRequest
		have        int
		code, field string
	}{
		{VolumeRequest{Name: "Data", Region: "cd-1", SizeGiB: 1}, 0, EINVALID, "name"},
		{VolumeRequest{Name: "-x", Region: "cd-1", SizeGiB: 1}, 0, EINVALID, "name"},
		{VolumeRequest{Name: "x", SizeGiB: 1}, 0, EINVALID, "region"},
		{VolumeRequest{Name: "x", Region: "cd-1", SizeGiB: 0}, 0, EINVALID, "size_gib"},
		{VolumeRequest{Name: "x", Region: "cd-1", SizeGiB: 100}, 2000, EPOLICY, "size_gib"},
	} {
		err := c.req.Validate(2048, c.have)
		if ErrorCode(err) != c.code || ErrorField(err) != c.field {
			t.Errorf("%+v (have %d): %v; want %s on %s", c.req, c.have, err, c.code, c.field)
		}
	}
	// Every problem at once.
	bad := VolumeRequest{Name: "", Region: "", SizeGiB: 0}
	if errs, ok := bad.Validate(2048, 0).(ValidationErrors); !ok || len(errs) != 3 {
		t.Errorf("all problems: %v", bad.Validate(2048, 0))
	}
}
