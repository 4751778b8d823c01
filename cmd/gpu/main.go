// Command gpu is the customers' command line for gpuportal, over the
// public JSON API only, with an API token:
//
//	gpu login --url https://portal.example.com --email you@example.com   (reads the password from stdin)
//	gpu models | gpu instances | gpu balance
//	gpu launch --kind spot --model a100-80g --count 1 -- python train.py
//	gpu stop 42 | gpu logs -f 42 | gpu ssh 42 [ssh args…]
//	gpu offerings --model h100-80g --count 8 --hours 48 | gpu book … | gpu cancel 7
//	gpu volumes create data --size 100 | gpu cp train.csv vol:3:datasets/
//
// Tables by default, --json for scripts. Exit status: 0 done, 1 the
// portal refused (its message on stderr), 2 bad usage, 3 the portal could
// not be reached. Messages follow LANG (zh_CN or English). The standard
// library's flag package is enough for a dozen commands with a few flags
// each; cobra would be the one dependency the CLI has.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

// Exit statuses.
const (
	exitOK       = 0
	exitRefused  = 1
	exitUsage    = 2
	exitNoPortal = 3
)

// command is one `gpu` subcommand.
type command struct {
	name, usage, summary string
	run                  func(c *cli, args []string) error
}

var commands = []command{
	{"login", "login --url URL (--email EMAIL | --token TOKEN)", "keep an API token for this portal (the password is read from stdin)", (*cli).login},
	{"models", "models", "GPU models with their on-demand and spot prices", (*cli).models},
	{"instances", "instances [--label KEY=VALUE] [--limit N]", "your instances (every one; --label: those labelled so)", (*cli).instances},
	{"launch", "launch --kind spot|on_demand --model M [--region R] [--count N] [--image I] [--idle-stop MIN] [--volume ID] [--disk GIB] [--label KEY=VALUE…] [-- COMMAND…]", "launch an instance (no command: a machine to log into)", (*cli).launch},
	{"stop", "stop [--keep-disk] ID", "stop an instance (--keep-disk: keep its disk to start it again)", (*cli).stop},
	{"start", "start ID [--count N | --no-gpu]", "start a stopped instance whose disk was kept, on any node of its region (--no-gpu: no-GPU mode, to set up or move data cheaply)", (*cli).start},
	{"release", "release ID", "let a stopped instance's kept disk go for good", (*cli).release},
	{"logs", "logs [-f] ID", "an instance's whole log, from its node (-f: follow it until the instance ends)", (*cli).logs},
	{"ssh", "ssh ID [ssh arguments…]", "log into a running instance with the system ssh", (*cli).ssh},
	{"availability", "availability --model M [--region R] [--from TIME] [--hours N]", "free GPUs and prices, hour by hour", (*cli).availability},
	{"offerings", "offerings --model M --hours N [--count N] [--sort price|start] [--limit N]", "windows that fit a booking, cheapest or earliest first", (*cli).offerings},
	{"book", "book --model M --count N (--start TIME (--end TIME | --hours N) | --offering N --hours N [--sort price|start]) [--region R] [--resume INSTANCE] [--label KEY=VALUE…]", "book GPUs for a window (paid from the balance; --offering N: the N-th window gpu offerings lists; --resume: a stopped instance with its kept disk starts on them)", (*cli).book},
	{"extend", "extend ID [--hours N]", "extend a reservation (without --hours: what it can be extended by, and the price)", (*cli).extend},
	{"reservations", "reservations [--label KEY=VALUE] [--limit N]", "your reservations", (*cli).reservations},
	{"waitlist", "waitlist [list | join --model M --count N --start TIME (--end TIME | --hours N) [--auto-book] | join --flexible --model M --count N --hours N --start TIME --latest-end TIME | leave ID | claim ID]", "wait for GPUs that are booked: told (or booked, --auto-book) when they free", (*cli).waitlist},
	{"cancel", "cancel ID", "cancel a reservation (its fee as the policy says)", (*cli).cancel},
	{"jobs", "jobs [list [--label KEY=VALUE] [--limit N] | submit --model M --tasks N [--gpus N] [--parallel N] [--volume ID] [--disk GIB] [--label KEY=VALUE…] -- COMMAND… | show ID | cancel ID]", "batch jobs", (*cli).jobs},
	{"volumes", "volumes [list | create NAME --size GIB [--region R] | delete ID | ls ID [PATH]]", "your volumes", (*cli).volumes},
	{"images", "images [list | import NAME --volume ID --path PATH | save INSTANCE NAME | show ID | delete ID]", "the image catalog and your own images (import one from a docker save archive in a volume, or save an instance's disk)", (*cli).images},
	{"cp", "cp [--progress] SOURCE DESTINATION (one of them vol:ID:PATH; - for stdin or stdout)", "copy a file into or out of a volume (with how far it is on a terminal, or --progress)", (*cli).cp},
	{"balance", "balance", "your balance and what runs on it", (*cli).balance},
	{"topup", "topup YUAN [--provider test|stripe]", "add money: prints the page to pay at", (*cli).topup},
	{"drill", "drill ID", "a practice interruption notice for your running spot instance (nothing is stopped)", (*cli).drill},
	{"catalog", "catalog", "every model and region: prices, GPUs free now, spot interruptions, the next whole node to book", (*cli).catalog},
	{"webhooks", "webhooks [list | add URL [--events a,b] | delete ID | test ID | roll ID | deliveries ID [--limit N] | redeliver ID DELIVERY]", "endpoints told of events as they happen, signed", (*cli).webhooks},
	{"team", "team [list | create NAME | use ID|me | members ID | invite ID EMAIL ROLE | accept LINK | limit ID USER [--monthly YUAN|none] [--gpus N|none] [--role ROLE] | remove ID USER]", "teams: one balance, members in roles with limits (--team ID on any command acts for a team)", (*cli).teams},
	{"completion", "completion [bash|zsh|fish]", "print a shell completion script (bash: eval \"$(gpu completion)\"; zsh: gpu completion zsh > \"${fpath[1]}/_gpu\"; fish: gpu completion fish | source)", (*cli).completion},
}

func run(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{getenv: getenv, stdin: stdin, out: stdout, errOut: stderr, lang: langOf(getenv), team: -1}
	// --json and --team anywhere before "--" (after it, everything is the
	// command's).
	var rest []string
	for k := 0; k < len(args); k++ {
		a := args[k]
		if a == "--" {
			rest = append(rest, args[k:]...)
			break
		}
		if a == "--json" || a == "--output=json" {
			c.json = true
			continue
		}
		if a == "--output" && k+1 < len(args) {
			k++
			if args[k] != "json" && args[k] != "table" {
				fmt.Fprintln(stderr, "gpu:", c.T("--output is json or table"))
				return exitUsage
			}
			c.json = args[k] == "json"
			continue
		}
		if v, ok := strings.CutPrefix(a, "--team="); ok || (a == "--team" && k+1 < len(args)) {
			if !ok {
				k++
				v = args[k]
			}
			id, err := teamArg(v)
			if err != nil {
				fmt.Fprintln(stderr, "gpu:", c.T("--team is a team's id, or me for your own account"))
				return exitUsage
			}
			c.team = id
			continue
		}
		rest = append(rest, a)
	}
	if len(rest) == 0 || rest[0] == "help" || rest[0] == "-h" || rest[0] == "--help" {
		c.usage(stderr)
		if len(rest) == 0 {
			return exitUsage
		}
		return exitOK
	}
	switch rest[0] {
	case "image":
		rest[0] = "images" // gpu image save …, as people say it
	case "teams":
		rest[0] = "team"
	}
	for _, cmd := range commands {
		if cmd.name != rest[0] {
			continue
		}
		err := cmd.run(c, rest[1:])
		if err == nil {
			return exitOK
		}
		var se sshExit
		if errors.As(err, &se) {
			return se.code // ssh said why itself
		}
		fmt.Fprintln(stderr, "gpu:", err)
		var u usageError
		var n unreachableError
		switch {
		case errors.As(err, &u):
			fmt.Fprintln(stderr, c.T("usage: gpu %s", cmd.usage))
			return exitUsage
		case errors.As(err, &n):
			return exitNoPortal
		default:
			return exitRefused
		}
	}
	fmt.Fprintln(stderr, c.T("gpu: unknown command %q", rest[0]))
	c.usage(stderr)
	return exitUsage
}

func (c *cli) usage(w io.Writer) {
	fmt.Fprintln(w, c.T("usage: gpu [--json | --output json|table] [--team ID] COMMAND [ARGUMENTS]"))
	for _, cmd := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", cmd.name, c.T(cmd.summary))
	}
	fmt.Fprintln(w, c.T("Lists page through every row (--limit N to cut). Exit status: 0 done, 1 the portal refused (its message is printed), 2 a mistake in the command line, 3 the portal could not be reached."))
}

// usageError is a mistake in the command line (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// unreachableError: the portal did not answer (exit 3).
type unreachableError struct{ err error }

func (e unreachableError) Error() string { return e.err.Error() }

func langOf(getenv func(string) string) string {
	for _, k := range []string{"LC_ALL", "LC_MESSAGES", "LANG"} {
		if v := getenv(k); v != "" {
			if strings.HasPrefix(strings.ToLower(v), "zh") {
				return "zh-CN"
			}
			return "en"
		}
	}
	return "en"
}
