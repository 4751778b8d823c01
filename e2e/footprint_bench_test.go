package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// BenchmarkContainerAgentFootprint runs a podman agent (simulated DGX
// A100) with 8 running containers, one per GPU, and reports the time from
// each launch to the workload's first line in its log, then the agent's
// resident memory and CPU use over 30 s (conmon, one per container, is
// reported apart). Run with -benchtime 1x.
func BenchmarkContainerAgentFootprint(b *testing.B) {
	needPodman(b)
	for i := 0; i < b.N; i++ {
		p := startPortalB(b)
		addTestImage(b, p)
		dir := b.TempDir()
		state := filepath.Join(dir, "node")
		ag := startPodmanAgent(b, p, state, filepath.Join(dir, "ckpt"), "--heartbeat", "10s")
		var firstLine []time.Duration
		for range 8 {
			t0 := time.Now()
			inst := launchIn(b, p, 1, "echo started; while true; do sleep 5; done", false)
			log := filepath.Join(state, "logs", fmt.Sprintf("instance-%d.log", inst.ID))
			for {
				if raw, _ := os.ReadFile(log); strings.Contains(string(raw), "started") {
					break
				}
				if time.Since(t0) > 60*time.Second {
					b.Fatalf("instance %d: no first line after 60 s", inst.ID)
				}
				time.Sleep(10 * time.Millisecond)
			}
			firstLine = append(firstLine, time.Since(t0))
		}
		slices.Sort(firstLine)
		b.ReportMetric(firstLine[len(firstLine)/2].Seconds()*1000, "launch_to_first_line_p50_ms")
		b.ReportMetric(firstLine[len(firstLine)-1].Seconds()*1000, "launch_to_first_line_max_ms")
		pid := ag.cmd.Process.Pid
		time.Sleep(2 * time.Second)
		cpu0 := cpuTicks(b, pid)
		start := time.Now()
		time.Sleep(30 * time.Second)
		cpu := float64(cpuTicks(b, pid)-cpu0) / 100
		b.ReportMetric(cpu/time.Since(start).Seconds()*100, "cpu_%")
		b.ReportMetric(float64(rssKiB(b, pid))/1024, "rss_MiB")
		var conmon int64
		for _, c := range processesNamed("conmon") {
			conmon += rssKiB(b, c)
		}
		b.ReportMetric(float64(conmon)/1024, "conmon_rss_MiB_total")
	}
}

// processesNamed lists the pids whose command name is name.
func processesNamed(name string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm")); strings.TrimSpace(string(comm)) == name {
			pids = append(pids, pid)
		}
	}
	return pids
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
