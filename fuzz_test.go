package gpuportal

import (
	"path"
	"strings"
	"testing"
)

// (DESIGN §8: parsers are fuzzed) A pasted key line never panics the
// parser and is either refused as invalid_input naming its field, or is a
// key the gateway accepts, with a fingerprint.
func FuzzParseSSHKey(f *testing.F) {
	f.Add("laptop", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq3oEOyEN5fnW8M3X3wCsZ8S0K5bqRP4e8nT1zWAPZc me@laptop")
	f.Add("", "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC7 short")
	f.Add("x", "-----BEGIN OPENSSH PRIVATE KEY-----")
	f.Add("", `command="rm -rf /" ssh-ed25519 AAAA`)
	f.Add("\x00", "\n\n")
	f.Fuzz(func(t *testing.T, name, line string) {
		k, err := ParseSSHKey(name, line)
		if err != nil {
			if ErrorCode(err) != EINVALID || (ErrorField(err) != "public_key" && ErrorField(err) != "name") {
				t.Fatalf("ParseSSHKey(%q, %q): %v", name, line, err)
			}
			return
		}
		if !strings.HasPrefix(k.Fingerprint, "SHA256:") || k.PublicKey == "" || k.Name == "" {
			t.Fatalf("accepted %q as %+v", line, k)
		}
	})
}

// A volume path a customer gives never leaves the volume: whatever comes
// in, what comes out is relative, clean and has no "..", or it is
// refused as invalid_input on path.
func FuzzCleanVolumePath(f *testing.F) {
	for _, seed := range []string{"", ".", "/", "data/train.csv", "../x", "a/../../b", "/etc/passwd", "a\\..\\b", "a/./b//c/", "a\x00b", "....//..."} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := CleanVolumePath(p)
		if err != nil {
			if ErrorCode(err) != EINVALID || ErrorField(err) != "path" {
				t.Fatalf("CleanVolumePath(%q): %v", p, err)
			}
			return
		}
		if strings.HasPrefix(got, "/") || got != path.Clean(got) || strings.ContainsRune(got, 0) {
			t.Fatalf("CleanVolumePath(%q) = %q", p, got)
		}
		for _, part := range strings.Split(got, "/") {
			if part == ".." {
				t.Fatalf("CleanVolumePath(%q) = %q leaves the volume", p, got)
			}
		}
	})
}
