package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkAgentFootprint runs a real agent (simulated DGX A100, 8 GPUs,
// the default 10 s heartbeat, metrics on) against a portal for 30 s and
// reports its resident memory and CPU use (DESIGN §7: < 20 MiB, < 1 % of a
// core). Run with -benchtime 1x.
func BenchmarkAgentFootprint(b *testing.B) {
	for i := 0; i < b.N; i++ {
		p := startPortalB(b)
		dir := b.TempDir()
		ag := p.startAgentArgs(b, dir+"/node", dir+"/ckpt", "mock:dgxa100", "10s", "127.0.0.1:0")
		pid := ag.cmd.Process.Pid
		time.Sleep(2 * time.Second) // settle after enrolment
		cpu0 := cpuTicks(b, pid)
		start := time.Now()
		time.Sleep(30 * time.Second)
		cpu := float64(cpuTicks(b, pid)-cpu0) / 100 // USER_HZ
		b.ReportMetric(cpu/time.Since(start).Seconds()*100, "cpu_%")
		b.ReportMetric(float64(rssKiB(b, pid))/1024, "rss_MiB")
	}
}

func cpuTicks(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw)[strings.LastIndexByte(string(raw), ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

func rssKiB(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}
