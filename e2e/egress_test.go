package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gpuportal"
)

// (issue 22, item 15) A workload on --workload-network bridge has a route
// to the internet and none to the node, its neighbour on the bridge, the
// cloud's metadata service or any private range; its own metadata
// endpoint still answers. The probe asks the kernel for routes (`ip route
// get` sends nothing) and tries one connection to the node's bridge
// address, which a blackhole refuses before any packet leaves.
func TestBridgeWorkloadReachesOnlyTheInternet(t *testing.T) {
	t.Parallel()
	needPodman(t)
	p := startPortal(t, false)
	addTestImage(t, p)
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	ag := startPodmanAgent(t, p, filepath.Join(dir, "node"), ckpt, "--workload-network", "bridge")

	// The node listens on every address: a connection from the workload
	// would arrive here.
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	arrived := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			arrived <- struct{}{}
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	neighbour := launchIn(t, p, 1, untilTERM("sleep 600"), false)
	var neighbourIP string
	eventually(t, 30*time.Second, "the neighbour's container to have an address", func() bool {
		out, _ := exec.Command("podman", "ps", "--quiet", "--filter", fmt.Sprintf("label=gpuportal.instance=%d", neighbour.ID),
			"--filter", "label=gpuportal.node="+ag.nodeID, "--format", "{{.ID}}").Output()
		id := strings.TrimSpace(string(out))
		if id == "" {
			return false
		}
		ip, _ := exec.Command("podman", "inspect", "--format", "{{.NetworkSettings.IPAddress}}", id).Output()
		neighbourIP = strings.TrimSpace(string(ip))
		return neighbourIP != ""
	})

	closed := []string{neighbourIP, "169.254.169.254", "10.1.2.3", "172.16.5.5", "192.168.1.1", "100.64.0.1"}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			closed = append(closed, n.IP.String()) // the node's own addresses
		}
	}
	probe := `d="$GPUPORTAL_CHECKPOINT_DIR"
route() { if ip route get "$1" > /dev/null 2>&1; then echo "$1 routed"; else echo "$1 closed"; fi; }
gw=$(ip route | sed -n 's/^default via \([0-9.]*\).*/\1/p')
echo "$gw" > "$d/gateway"
for a in $gw ` + strings.Join(closed, " ") + ` 1.1.1.1 8.8.8.8; do route "$a"; done > "$d/routes"
if nc -w 2 "$gw" ` + strconv.Itoa(port) + ` < /dev/null > /dev/null 2>&1; then echo allowed; else echo refused; fi > "$d/node"
ip route del default > /dev/null 2>&1 && echo changed > "$d/tampered"
printf 'GET /latest/meta-data/instance-id HTTP/1.0\r\n\r\n' | nc -w 2 127.0.0.1 80 | tail -n 1 > "$d/instance-id"
echo done > "$d/written"
` + untilTERM("sleep 600")
	inst := launchIn(t, p, 1, probe, false)
	runDir := filepath.Join(ckpt, fmt.Sprintf("instance-%d", inst.ID))
	defer func() {
		if t.Failed() {
			i := p.instance(inst.ID)
			t.Logf("instance %s, error %q, log:\n%s\nagent:\n%s", i.Status, i.Error, i.LogTail, ag.output())
		}
	}()
	eventually(t, 30*time.Second, "the probe to write its findings", func() bool {
		_, err := os.Stat(filepath.Join(runDir, "written"))
		return err == nil
	})
	gw := readTrim(filepath.Join(runDir, "gateway"))
	if net.ParseIP(gw) == nil {
		t.Fatalf("the container's default route goes through %q", gw)
	}
	routes := readTrim(filepath.Join(runDir, "routes"))
	for _, a := range append([]string{gw}, closed...) {
		if !strings.Contains(routes, a+" closed") {
			t.Errorf("%s is reachable from the workload:\n%s", a, routes)
		}
	}
	for _, a := range []string{"1.1.1.1", "8.8.8.8"} {
		if !strings.Contains(routes, a+" routed") {
			t.Errorf("the internet (%s) is not routed:\n%s", a, routes)
		}
	}
	if got := readTrim(filepath.Join(runDir, "node")); got != "refused" {
		t.Errorf("a connection to the node's bridge address was %s", got)
	}
	select {
	case <-arrived:
		t.Error("the node's listener took a connection from the workload")
	default:
	}
	if got := readTrim(filepath.Join(runDir, "tampered")); got != "" {
		t.Error("the workload changed its own routes")
	}
	if id := readTrim(filepath.Join(runDir, "instance-id")); id != strconv.FormatInt(inst.ID, 10) {
		t.Errorf("metadata at 127.0.0.1:80 said instance-id %q", id)
	}
	for _, id := range []int64{inst.ID, neighbour.ID} {
		p.api("POST", fmt.Sprintf("/api/v1/instances/%d/stop", id), p.user, "", nil)
	}
	eventually(t, 30*time.Second, "both to stop", func() bool {
		return p.instance(inst.ID).Status == gpuportal.InstanceStopped && p.instance(neighbour.ID).Status == gpuportal.InstanceStopped
	})
}
