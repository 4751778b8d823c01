package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The agent exports GPU gauges under dcgm-exporter's names and labels.
func TestAgentMetrics(t *testing.T) {
	t.Parallel()
	p := startPortal(t, false)
	dir := t.TempDir()
	ag := p.runAgent(t, dir+"/node", dir+"/ckpt", "mock:dgxh100", true, "1s", "127.0.0.1:0")
	addr := regexp.MustCompile(`msg="metrics listening" addr=(\S+)`)
	var url string
	eventually(t, 5*time.Second, "the metrics address in the log", func() bool {
		if m := addr.FindStringSubmatch(ag.output()); m != nil {
			url = "http://" + m[1] + "/metrics"
			return true
		}
		return false
	})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	for _, name := range []string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_XID_ERRORS",
		"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"} {
		if n := strings.Count(text, "\n"+name+"{"); n != 8 {
			t.Errorf("%s: %d series; want 8", name, n)
		}
	}
	if !regexp.MustCompile(`DCGM_FI_DEV_FB_FREE\{Hostname="node",UUID="GPU-[0-9a-f-]+",device="nvidia0",gpu="0",modelName="NVIDIA H100 80GB HBM3"\} 81920`).MatchString(text) {
		t.Errorf("labels or values off:\n%s", text)
	}
}
