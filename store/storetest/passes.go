package storetest

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// passEnv is set in the process Main starts to run the PostgreSQL pass.
const passEnv = "STORETEST_PASS"

// Main runs a package's tests on SQLite and, when PORTAL_TEST_POSTGRES is
// set, again on PostgreSQL. Without it the second run is skipped with the
// reason printed, except under CI=true, where that is a failure. atExit
// runs after both (e.g. browsertest.Close).
//
// The PostgreSQL pass runs beside the SQLite one, in a second process of
// the same test binary with the same flags: most of either pass waits (on
// the database, a browser, a timer), and one after the other they made the
// web package the longest of the suite. Its output follows the SQLite
// pass's, or comes at once when it fails. Benchmarks, fuzzing and profiles
// keep the passes one after the other, so that neither measures the other.
func Main(m *testing.M, atExit ...func()) {
	flag.Parse()
	if os.Getenv(passEnv) == "postgres" {
		engine = "postgres"
		code := m.Run()
		dropPostgresTemplate()
		exit(code, atExit)
	}
	if _, ok := postgresURL(); !ok {
		code := m.Run()
		fmt.Printf("storetest: PostgreSQL run skipped: %s is not set (e.g. postgres://postgres@127.0.0.1:5432/test)\n", PostgresEnv)
		if os.Getenv("CI") == "true" {
			fmt.Printf("storetest: CI=true requires the PostgreSQL run\n")
			code = max(code, 1)
		}
		exit(code, atExit)
	}
	if measuring() {
		code := m.Run()
		fmt.Println("storetest: running the same tests on PostgreSQL")
		engine = "postgres"
		pgCode := m.Run()
		dropPostgresTemplate()
		if pgCode != 0 {
			fmt.Println("storetest: FAIL on PostgreSQL")
		}
		exit(max(code, pgCode), atExit)
	}
	pg, err := startPostgresPass()
	if err != nil {
		fmt.Printf("storetest: start the PostgreSQL pass: %v\n", err)
		exit(1, atExit)
	}
	code := m.Run()
	if !pg.report() {
		code = max(code, 1)
	}
	exit(code, atExit)
}

func exit(code int, atExit []func()) {
	for _, f := range atExit {
		f()
	}
	os.Exit(code)
}

// measuring reports whether the run measures something (benchmarks, a
// profile, coverage) or fuzzes, where two passes at once would disturb
// each other.
func measuring() bool {
	for _, name := range []string{"test.bench", "test.fuzz", "test.cpuprofile", "test.memprofile", "test.blockprofile", "test.mutexprofile", "test.trace", "test.coverprofile", "test.list"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return true
		}
	}
	return false
}

// postgresPass is the PostgreSQL pass running in a process of its own.
type postgresPass struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
	err  error

	mu      sync.Mutex
	printed bool
}

// startPostgresPass runs this test binary again, with the same flags, on
// PostgreSQL. It is killed if this process dies (a go test timeout). Its
// own timeout comes a tenth earlier than this process's, so that a test
// hanging there is reported with its stacks, not lost with this process.
func startPostgresPass() (*postgresPass, error) {
	args := os.Args[1:]
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 0 {
			args = append(args[:len(args):len(args)], "-test.timeout="+(d-d/10).String())
		}
	}
	p := &postgresPass{done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = append(os.Environ(), passEnv+"=postgres")
	p.cmd.Stdout = &p.out
	p.cmd.Stderr = &p.out
	p.cmd.SysProcAttr = killWithParent()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
		if p.err != nil {
			p.print() // now: this process may be the next to hang
		}
	}()
	return p, nil
}

// report waits for the pass to end, prints its output if it has not been
// printed, and reports whether it passed.
func (p *postgresPass) report() bool {
	<-p.done
	p.print()
	if p.err != nil {
		fmt.Printf("storetest: FAIL on PostgreSQL: %v\n", p.err)
		return false
	}
	return true
}

func (p *postgresPass) print() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.printed {
		return
	}
	p.printed = true
	fmt.Println("storetest: the same tests on PostgreSQL (run beside the SQLite pass):")
	os.Stdout.Write(p.out.Bytes())
}
