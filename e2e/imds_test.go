package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"gpuportal"
)

// (issue 13) A workload that uses the stock AWS SDK for Go v2 IMDS client —
// which keeps only the scheme and host of AWS_EC2_METADATA_SERVICE_ENDPOINT —
// reads its instance-id and sees the interruption notice before its
// SIGTERM: the endpoint is served at the root path, one per instance.
func TestStockAWSSDKSeesTheNotice(t *testing.T) {
	t.Parallel()
	p := startPortal(t, false)
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	p.startAgent(t, dir+"/node", ckpt, "mock:dgxa100", true)
	a := launch(t, p, 1, imdsWorkloadBin, false)
	b := launch(t, p, 1, imdsWorkloadBin, false)
	dirOf := func(i gpuportal.Instance) string { return filepath.Join(ckpt, fmt.Sprintf("instance-%d", i.ID)) }
	for _, i := range []gpuportal.Instance{a, b} {
		eventually(t, 15*time.Second, "the SDK to read instance-id", func() bool {
			raw, err := os.ReadFile(filepath.Join(dirOf(i), "instance-id"))
			return err == nil && string(raw) == strconv.FormatInt(i.ID, 10)
		})
	}
	var got gpuportal.Instance
	if st := p.api("POST", fmt.Sprintf("/api/v1/admin/instances/%d/interrupt", a.ID), p.admin, "", &got); st != 200 {
		t.Fatalf("interrupt = %d", st)
	}
	eventually(t, 5*time.Second, "the SDK to see the notice", func() bool {
		_, err := os.Stat(filepath.Join(dirOf(a), "notice"))
		return err == nil
	})
	raw, _ := os.ReadFile(filepath.Join(dirOf(a), "notice"))
	var action map[string]string
	if err := json.Unmarshal(raw, &action); err != nil || action["action"] != "terminate" || action["time"] == "" {
		t.Fatalf("notice as the SDK read it: %s", raw)
	}
	eventually(t, 25*time.Second, "the interruption to finish", func() bool { return p.instance(a.ID).Status == gpuportal.InstanceInterrupted })
	if term, _ := os.ReadFile(filepath.Join(dirOf(a), "term")); string(term) != "after-notice" {
		t.Fatalf("SIGTERM came %q; log:\n%s", term, p.instance(a.ID).LogTail)
	}
	// The other instance's endpoint shows no notice.
	if _, err := os.Stat(filepath.Join(dirOf(b), "notice")); err == nil {
		t.Fatal("the other instance saw the notice")
	}
	var stopped gpuportal.Instance
	p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", b.ID), p.user, "", &stopped)
	eventually(t, 20*time.Second, "the other instance to stop", func() bool { return p.instance(b.ID).Status == gpuportal.InstanceStopped })
}
