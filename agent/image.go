package agent

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// ImportBusyboxImage makes a container image without a registry: a root
// file system of a static busybox (with its applets linked in /bin) plus
// extra files (path in the image → path on this machine, copied with mode
// 0755), imported as ref. The demo and the tests run workloads in it; a
// production node preloads real images instead (`podman load`).
func ImportBusyboxImage(cli, ref, busybox string, extra map[string]string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode})
	}
	file := func(name, src string) error {
		raw, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(raw))}); err != nil {
			return err
		}
		_, err = tw.Write(raw)
		return err
	}
	for _, d := range []string{"bin", "dev", "etc", "proc", "sys", "checkpoint"} {
		if err := dir(d, 0o755); err != nil {
			return err
		}
	}
	if err := dir("tmp", 0o1777); err != nil {
		return err
	}
	if err := file("bin/busybox", busybox); err != nil {
		return fmt.Errorf("busybox: %w", err)
	}
	applets, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("%s --list: %w", busybox, err)
	}
	for _, a := range strings.Fields(string(applets)) {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}); err != nil {
			return err
		}
	}
	for name, src := range extra {
		if err := file(strings.TrimPrefix(name, "/"), src); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	cmd := exec.Command(cli, "import", "--change", "ENV PATH=/usr/local/bin:/usr/bin:/bin", "-", ref)
	cmd.Stdin = io.Reader(&buf)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s import: %v: %s", cli, err, out)
	}
	return nil
}

// StaticBusybox finds a statically linked busybox (Debian's
// busybox-static), which runs in an image with nothing else in it.
func StaticBusybox() (string, bool) {
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		static := true
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				static = false
			}
		}
		f.Close()
		if static {
			return p, true
		}
	}
	return "", false
}
