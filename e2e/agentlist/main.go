// Command agentlist lists the keys of the SSH agent at $SSH_AUTH_SOCK, as
// `ssh-add -l` does: the e2e tests run it inside an instance (a static
// binary in a busybox image) to see that ssh -A reaches the client's
// agent.
package main

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

func main() {
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		fmt.Println("no agent: SSH_AUTH_SOCK is not set")
		os.Exit(2)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Println("no agent:", err)
		os.Exit(2)
	}
	defer c.Close()
	keys, err := agent.NewClient(c).List()
	if err != nil {
		fmt.Println("agent:", err)
		os.Exit(1)
	}
	for _, k := range keys {
		pub, err := ssh.ParsePublicKey(k.Blob)
		if err != nil {
			continue
		}
		fmt.Println(ssh.FingerprintSHA256(pub), k.Comment)
	}
}
