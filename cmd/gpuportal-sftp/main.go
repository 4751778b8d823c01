// Command gpuportal-sftp is the SFTP server the agent runs inside an
// instance's container for `sftp` and `scp` through the portal's SSH
// gateway: images such as busybox have no sftp-server of their own. It
// speaks SFTP on stdin/stdout as the container's user, so it reaches
// exactly what a shell in the container reaches. Build it static
// (CGO_ENABLED=0): it runs in images without a C library.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/pkg/sftp"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-h" || os.Args[1] == "--help") {
		fmt.Println("usage: gpuportal-sftp  (speaks SFTP on stdin/stdout; started by the gpuportal agent)")
		return
	}
	dir, _ := os.Getwd()
	server, err := sftp.NewServer(struct {
		io.Reader
		io.WriteCloser
	}{os.Stdin, os.Stdout}, sftp.WithServerWorkingDirectory(dir))
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpuportal-sftp:", err)
		os.Exit(1)
	}
	if err := server.Serve(); err != nil && err != io.EOF {
		fmt.Fprintln(os.Stderr, "gpuportal-sftp:", err)
		os.Exit(1)
	}
}
