// Command imdsworkload is a spot workload written the way customers write
// them for EC2 Spot: it uses the stock AWS SDK for Go v2 IMDS client (no
// custom endpoint, no middleware — the SDK reads
// AWS_EC2_METADATA_SERVICE_ENDPOINT itself), reads its instance-id, then
// polls spot/instance-action until the interruption notice comes and
// checkpoints. The e2e tests run it on a real agent and read what it wrote
// into its checkpoint directory:
//
//	instance-id  what IMDS said
//	rebalance    the rebalance recommendation document, once it appeared
//	notice       the instance-action document, once it appeared
//	term         "after-notice" or "without-notice", on SIGTERM
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

func main() {
	dir := os.Getenv("GPUPORTAL_CHECKPOINT_DIR")
	// Each file appears whole (written aside, then renamed): the test
	// reads it the moment it exists.
	write := func(name, text string) {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	client := imds.New(imds.Options{})
	ctx := context.Background()

	id, err := get(ctx, client, "instance-id")
	if err != nil {
		write("error", err.Error())
		os.Exit(1)
	}
	write("instance-id", id)
	fmt.Println("running as instance", id)

	noticed, rebalanced := false, false
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-term:
			if noticed {
				write("term", "after-notice")
			} else {
				write("term", "without-notice")
			}
			os.Exit(0)
		case <-tick.C:
			if !rebalanced {
				if doc, err := get(ctx, client, "events/recommendations/rebalance"); err == nil {
					rebalanced = true
					write("rebalance", doc)
					fmt.Println("rebalance recommendation:", doc)
				}
			}
			if noticed {
				continue
			}
			if action, err := get(ctx, client, "spot/instance-action"); err == nil {
				noticed = true
				write("notice", action)
				fmt.Println("interruption notice:", action)
			}
		}
	}
}

func get(ctx context.Context, c *imds.Client, path string) (string, error) {
	out, err := c.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		return "", err
	}
	defer out.Content.Close()
	b, err := io.ReadAll(out.Content)
	return string(b), err
}
