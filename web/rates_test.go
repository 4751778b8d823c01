package web

import (
	"net/http"
	"strings"
	"testing"

	"gpuportal"
	"gpuportal/store/storetest"
)

func TestRatesAPIAndPage(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	st, body := e.apiCall("GET", "/api/v1/interruption-rates?model=a100-80g&region=cd-1&count=2", "", "")
	if st != 200 || !strings.Contains(body, `"trailing_30d":{"instances":0,"interrupted":0,"rate":0,"bucket":"\u003c5%","lost_gpu_hours":0,"lost_gpu_hours_per_100_spot_gpu_hours":0,"share_lost_under_5_min":1,"measured_interruptions":0}`) || !strings.Contains(body, `"safe_until":null`) {
		t.Fatalf("rates = %d %s", st, body)
	}
	r := decodeObject(t, body)
	if cells := r["by_hour_of_week"].([]any); len(cells) != 168 {
		t.Fatalf("%d cells", len(cells))
	}
	for _, q := range []string{"?model=v100&region=cd-1", "?model=a100-80g&region=cd-1&count=99", "?model=a100-80g&region=cd-1&count=x"} {
		if st, body := e.apiCall("GET", "/api/v1/interruption-rates"+q, "", ""); st != http.StatusBadRequest || errorCode(t, body) != gpuportal.EINVALID {
			t.Errorf("%s = %d %s", q, st, body)
		}
	}
	p := e.browser().get("/rates?model=a100-80g&region=cd-1")
	if p.status != 200 || strings.Count(p.body, "<rect") != 168+5 || !strings.Contains(p.body, `data-testid="bucket">&lt;5%`) || !strings.Contains(p.body, "<title>") {
		t.Fatalf("rates page = %d", p.status)
	}
}
