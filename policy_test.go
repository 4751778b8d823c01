package gpuportal

import "testing"

func TestNoticeFor(t *testing.T) {
	p := DefaultPolicy()
	p.SpotNoticeSeconds = 120
	for _, c := range []struct{ asked, want int }{{0, 120}, {300, 300}, {10, 10}} {
		if got := p.NoticeFor(c.asked); got != c.want {
			t.Errorf("NoticeFor(%d) = %d, want %d", c.asked, got, c.want)
		}
	}
}
