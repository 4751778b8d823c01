package gpuportal

import "testing"

// (issue 45) What an SSH client may name: forwards go to a host name or
// an IP address (the instance's loopback for localhost), variables are
// its locale and TERM only.
func TestForwardHostsAndSessionVariables(t *testing.T) {
	for host, want := range map[string]string{
		"": "", "localhost": "", "127.0.0.1": "", "::1": "",
		"pypi.org": "pypi.org", "files.pythonhosted.org.": "files.pythonhosted.org.", "1.1.1.1": "1.1.1.1", "2606:4700::1111": "2606:4700::1111",
	} {
		if got, ok := ForwardHost(host); !ok || got != want {
			t.Errorf("ForwardHost(%q) = %q %v, want %q", host, got, ok, want)
		}
	}
	for _, bad := range []string{"a b", "-x.com", "x..com", "host:22", "a/b", string(make([]byte, 300))} {
		if _, ok := ForwardHost(bad); ok {
			t.Errorf("ForwardHost(%q) accepted", bad)
		}
	}
	for _, kv := range [][2]string{{"LANG", "zh_CN.UTF-8"}, {"LC_ALL", "C"}, {"LC_MESSAGES", "en_US.UTF-8"}, {"TERM", "xterm-256color"}, {"LANGUAGE", "zh_CN:en"}} {
		if !SessionEnvAllowed(kv[0], kv[1]) {
			t.Errorf("%s=%s refused", kv[0], kv[1])
		}
	}
	for _, kv := range [][2]string{{"PATH", "/tmp"}, {"LD_PRELOAD", "/x.so"}, {"LC_", "x"}, {"LC_all", "C"}, {"LANG", ""}, {"LANG", "a\nb"}, {"GPUPORTAL_SESSION", "x"}} {
		if SessionEnvAllowed(kv[0], kv[1]) {
			t.Errorf("%s=%q allowed", kv[0], kv[1])
		}
	}
}

// (issue 50) A launch without a command is a machine to log into.
func TestLaunchWithoutACommandIsAMachine(t *testing.T) {
	r := LaunchRequest{Kind: KindOnDemand, Model: "a100-80g", Region: "cd-1", Count: 1, Command: "  "}
	if err := r.Validate(); err != nil || r.Command != MachineCommand {
		t.Fatalf("Validate = %v, command %q", err, r.Command)
	}
}
