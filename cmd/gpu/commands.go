package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gpuportal"
	"gpuportal/i18n"
)

// cli is one run of the command: where the portal is, the token, how to
// print.
type cli struct {
	getenv func(string) string
	stdin  io.Reader
	out    io.Writer
	errOut io.Writer // warnings
	lang   string
	json   bool
	http   *http.Client
	// team is --team: act for this team (0: oneself; -1: as the kept
	// configuration says, `gpu team use`).
	team int64
	// total is the last list answer's X-Total-Count (-1: none).
	total int
}

func (c *cli) T(key string, args ...any) string { return i18n.T(c.lang, key, args...) }

// config is what `gpu login` keeps (0600, in the user's config dir).
type config struct {
	URL   string `json:"url"`
	Token string `json:"token"`
	// Team: the team commands act for (`gpu team use`); 0: oneself.
	Team int64 `json:"team,omitempty"`
}

func (c *cli) configPath() (string, error) {
	if p := c.getenv("GPU_CONFIG"); p != "" {
		return p, nil
	}
	dir := c.getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := c.getenv("HOME")
		if home == "" {
			return "", fmt.Errorf("%s", c.T("no home directory for the configuration (set GPU_CONFIG)"))
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "gpuportal", "cli.json"), nil
}

// config reads the kept token; GPU_PORTAL_URL and GPU_TOKEN override it.
func (c *cli) config() (config, error) {
	var cfg config
	if p, err := c.configPath(); err == nil {
		if raw, err := os.ReadFile(p); err == nil {
			_ = json.Unmarshal(raw, &cfg)
		}
	}
	if v := c.getenv("GPU_PORTAL_URL"); v != "" {
		cfg.URL = v
	}
	if v := c.getenv("GPU_TOKEN"); v != "" {
		cfg.Token = v
	}
	if c.team >= 0 {
		cfg.Team = c.team
	}
	if cfg.URL == "" || cfg.Token == "" {
		return cfg, usageError{c.T("not logged in: run gpu login --url URL --email EMAIL first")}
	}
	return cfg, nil
}

// saveConfig keeps cfg for the next commands (0600).
func (c *cli) saveConfig(cfg config) error {
	p, err := c.configPath()
	if err != nil {
		return err
	}
	raw, _ := json.MarshalIndent(cfg, "", "  ")
	return writePrivateFile(p, raw)
}

// apiError is the portal's refusal: {"error":{"code","message"}}.
type apiError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.Code) }

func asAPIError(err error, into **apiError) bool { return errors.As(err, into) }

// call sends a JSON request to the API and decodes the answer into out.
func (c *cli) call(method, path string, in, out any) error {
	cfg, err := c.config()
	if err != nil {
		return err
	}
	return c.callAt(cfg, method, path, in, out)
}

func (c *cli) callAt(cfg config, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, strings.TrimRight(cfg.URL, "/")+"/api/v1"+path, body)
	if err != nil {
		return usageError{err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	return c.send(cfg, req, out)
}

// send makes the request with the token and decodes the answer: a
// refusal is an *apiError, out an io.Writer to copy the body into or a
// value to decode JSON into.
func (c *cli) send(cfg config, req *http.Request, out any) error {
	req.Header.Set("Accept-Language", c.lang)
	if cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
	}
	if cfg.Team > 0 {
		req.Header.Set("X-Team", strconv.FormatInt(cfg.Team, 10))
	}
	client := c.http
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Minute}
	}
	resp, err := client.Do(req)
	if err != nil {
		return unreachableError{err}
	}
	defer resp.Body.Close()
	c.total = -1
	if n, err := strconv.Atoi(resp.Header.Get("X-Total-Count")); err == nil {
		c.total = n
	}
	if resp.StatusCode >= 400 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var e struct {
			Error apiError `json:"error"`
		}
		if json.Unmarshal(raw, &e) != nil || e.Error.Message == "" {
			e.Error.Message = strings.TrimSpace(string(raw))
		}
		e.Error.Status = resp.StatusCode
		return &e.Error
	}
	switch o := out.(type) {
	case nil:
		return nil
	case interface {
		answer(http.Header, io.Reader) error
	}:
		return o.answer(resp.Header, resp.Body)
	case io.Writer:
		_, err := io.Copy(o, resp.Body)
		return err
	default:
		return json.NewDecoder(resp.Body).Decode(out)
	}
}

// print writes v as JSON (--json) or as a table.
func (c *cli) print(v any, header []string, rows [][]string) error {
	if c.json {
		enc := json.NewEncoder(c.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	for k := range header {
		header[k] = c.T(header[k])
	}
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	return w.Flush()
}

func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("gpu "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func (c *cli) login(args []string) error {
	fs := c.flags("login")
	url := fs.String("url", c.getenv("GPU_PORTAL_URL"), "")
	email := fs.String("email", "", "")
	token := fs.String("token", "", "")
	if err := fs.Parse(args); err != nil || *url == "" || (*email == "") == (*token == "") {
		return usageError{c.T("give the portal's --url and either --email (the password is read from stdin) or an API --token")}
	}
	cfg := config{URL: *url, Token: *token}
	if plainHTTPToAnotherHost(*url) {
		fmt.Fprintln(c.errOut, c.T("warning: %s is plain http:// to another machine: your password and token cross the network unencrypted. Use https://.", *url))
	}
	if *email != "" {
		raw, _ := io.ReadAll(io.LimitReader(c.stdin, 4096))
		password := strings.TrimRight(string(raw), "\r\n")
		host, _ := os.Hostname()
		var out struct {
			Token string `json:"token"`
		}
		if err := c.callAt(config{URL: *url}, "POST", "/auth/tokens", map[string]string{"email": *email, "password": password, "name": "gpu CLI on " + host}, &out); err != nil {
			return err
		}
		cfg.Token = out.Token
	}
	var me struct {
		Email string `json:"email"`
	}
	if err := c.callAt(cfg, "GET", "/me", nil, &me); err != nil {
		return err
	}
	p, err := c.configPath()
	if err != nil {
		return err
	}
	raw, _ := json.MarshalIndent(cfg, "", "  ")
	if err := writePrivateFile(p, raw); err != nil {
		return err
	}
	fmt.Fprintln(c.out, c.T("Logged in to %s as %s.", cfg.URL, me.Email))
	return nil
}

// writePrivateFile replaces the file at p with data, readable by its
// owner alone: written to a new 0600 file beside it and renamed over it,
// so an existing file's wider mode is never kept and a crash leaves the
// old file or the new one, never half of one.
func writePrivateFile(p string, data []byte) error {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".gpu-config-*") // 0600
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // a no-op once renamed
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), p)
}

// plainHTTPToAnotherHost reports whether url is http:// to a host that is
// not this machine's loopback: a login there sends the password and the
// token in the clear.
func plainHTTPToAnotherHost(raw string) bool {
	u, err := neturl.Parse(raw)
	if err != nil || u.Scheme != "http" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

func (c *cli) models(args []string) error {
	var list []struct {
		gpuportal.Model
		Spot gpuportal.Fen `json:"spot_price_per_gpu_hour_fen"`
	}
	if err := c.call("GET", "/models", nil, &list); err != nil {
		return err
	}
	var rows [][]string
	for _, m := range list {
		rows = append(rows, []string{m.ID, m.Name, fmt.Sprintf("%d GiB", m.MemoryGiB), m.ListPrice.String(), m.Spot.String()})
	}
	return c.print(list, []string{"MODEL", "NAME", "MEMORY", "ON-DEMAND/GPU-H", "SPOT/GPU-H"}, rows)
}

func (c *cli) instances(args []string) error {
	q, limit, err := c.listFlags("instances", args)
	if err != nil {
		return err
	}
	list, err := listAll[gpuportal.Instance](c, "/instances", q, limit)
	if err != nil {
		return err
	}
	var rows [][]string
	for _, i := range list {
		kind := string(i.Kind)
		if i.Borrowed {
			kind += " (borrowed)" // past one's team share, at the spot price
		}
		rows = append(rows, []string{strconv.FormatInt(i.ID, 10), kind, string(i.Status), fmt.Sprintf("%d × %s", i.Count, i.Model), i.Cost.String(), i.Command})
	}
	return c.print(list, []string{"ID", "KIND", "STATUS", "GPUS", "COST", "COMMAND"}, rows)
}

func (c *cli) launch(args []string) error {
	fs := c.flags("launch")
	kind := fs.String("kind", "spot", "")
	model := fs.String("model", "", "")
	region := fs.String("region", "cd-1", "")
	count := fs.Int("count", 1, "")
	image := fs.String("image", "", "")
	idle := fs.Int("idle-stop", 0, "")
	autoRestart := fs.Bool("auto-restart", false, "")
	volume := fs.Int64("volume", 0, "")
	disk := fs.Int("disk", 0, "")
	var labels labelFlags
	fs.Var(&labels, "label", "")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	command := strings.Join(fs.Args(), " ") // none: a machine to log into
	if *model == "" {
		return usageError{c.T("a launch needs --model (and a command after --, or none for a machine to log into)")}
	}
	req := map[string]any{"kind": *kind, "model": *model, "region": *region, "count": *count, "command": command, "auto_restart": *autoRestart}
	if *image != "" {
		req["image"] = *image
	}
	if *idle > 0 {
		req["idle_stop_minutes"] = *idle
	}
	if *volume > 0 {
		req["volumes"] = []map[string]int64{{"id": *volume}}
	}
	if *disk != 0 {
		req["disk_gib"] = *disk // the server says what sizes it takes
	}
	if len(labels) > 0 {
		req["labels"] = labels.labels()
	}
	var inst gpuportal.Instance
	if err := c.call("POST", "/instances", req, &inst); err != nil {
		return err
	}
	if c.json {
		return c.print(inst, nil, nil)
	}
	fmt.Fprintln(c.out, c.T("Instance %d launched (%s); gpu ssh %d once it runs.", inst.ID, inst.Status, inst.ID))
	return nil
}

// instanceArg is the ID argument of stop, logs and ssh.
func (c *cli) instanceArg(args []string) (int64, error) {
	if len(args) == 0 {
		return 0, usageError{c.T("which instance? give its ID")}
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id <= 0 {
		return 0, usageError{c.T("%q is not an instance ID", args[0])}
	}
	return id, nil
}

func (c *cli) stop(args []string) error {
	keep := len(args) > 0 && args[0] == "--keep-disk"
	if keep {
		args = args[1:]
	}
	id, err := c.instanceArg(args)
	if err != nil {
		return err
	}
	var inst gpuportal.Instance
	if err := c.call("POST", fmt.Sprintf("/instances/%d/stop", id), map[string]bool{"keep_disk": keep}, &inst); err != nil {
		return err
	}
	if c.json {
		return c.print(inst, nil, nil)
	}
	if keep {
		fmt.Fprintln(c.out, c.T("Instance %d is stopping; its disk is kept: gpu start %d starts it again with it.", id, id))
		return nil
	}
	fmt.Fprintln(c.out, c.T("Instance %d is stopping.", id))
	return nil
}

// start starts a stopped instance whose disk was kept.
func (c *cli) start(args []string) error {
	fs := c.flags("start")
	count := fs.Int("count", 0, "")
	noGPU := fs.Bool("no-gpu", false, "")
	var rest []string
	for len(args) > 0 { // the ID before or after the flags
		if err := fs.Parse(args); err != nil {
			return usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		rest, args = append(rest, fs.Arg(0)), fs.Args()[1:]
	}
	id, err := c.instanceArg(rest)
	if err != nil {
		return err
	}
	body := map[string]int{}
	switch {
	case *noGPU && *count != 0:
		return usageError{c.T("--no-gpu starts it on no GPU: leave out --count")}
	case *noGPU:
		body["count"] = 0
	case *count != 0:
		body["count"] = *count
	}
	var inst gpuportal.Instance
	if err := c.call("POST", fmt.Sprintf("/instances/%d/start", id), body, &inst); err != nil {
		return err
	}
	if c.json {
		return c.print(inst, nil, nil)
	}
	if inst.Count == 0 {
		fmt.Fprintln(c.out, c.T("Instance %d starts again with its disk in no-GPU mode at %s an hour (%s); gpu ssh %d once it runs.", id, inst.PricePerGPU.String(), inst.Status, id))
		return nil
	}
	fmt.Fprintln(c.out, c.T("Instance %d starts again with its disk (%s); gpu ssh %d once it runs.", id, inst.Status, id))
	return nil
}

// release lets a stopped instance's kept disk go for good.
func (c *cli) release(args []string) error {
	id, err := c.instanceArg(args)
	if err != nil {
		return err
	}
	if err := c.call("DELETE", fmt.Sprintf("/instances/%d", id), nil, nil); err != nil {
		return err
	}
	fmt.Fprintln(c.out, c.T("The disk of instance %d is released.", id))
	return nil
}

func (c *cli) logs(args []string) error {
	follow := len(args) > 0 && (args[0] == "-f" || args[0] == "--follow")
	if follow {
		args = args[1:]
	}
	id, err := c.instanceArg(args)
	if err != nil {
		return err
	}
	if follow {
		return c.followLogs(id, 2*time.Second)
	}
	return c.call("GET", fmt.Sprintf("/instances/%d/log", id), nil, c.out)
}

// ssh runs the system ssh (GPU_SSH overrides which) with the gateway's
// port and the instance as the user; further arguments go to ssh.
func (c *cli) ssh(args []string) error {
	id, err := c.instanceArg(args)
	if err != nil {
		return err
	}
	var where struct {
		Host string `json:"host"`
		Port int    `json:"port"`
	}
	if err := c.call("GET", "/ssh", nil, &where); err != nil {
		return err
	}
	bin := c.getenv("GPU_SSH")
	if bin == "" {
		bin = "ssh"
	}
	cmd := exec.Command(bin, append([]string{"-p", strconv.Itoa(where.Port), fmt.Sprintf("%d@%s", id, where.Host)}, args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdin, c.out, os.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return sshExit{exit.ExitCode()}
		}
		return err
	}
	return nil
}

// sshExit carries ssh's own exit status through.
type sshExit struct{ code int }

func (e sshExit) Error() string { return fmt.Sprintf("ssh exited with status %d", e.code) }

func (c *cli) balance(args []string) error {
	var b gpuportal.Balance
	if err := c.call("GET", "/balance", nil, &b); err != nil {
		return err
	}
	runsOut := "—"
	if b.RunsOutAt != nil {
		runsOut = b.RunsOutAt.Local().Format("2006-01-02 15:04")
	}
	return c.print(b, []string{"BALANCE", "HELD", "AVAILABLE", "BURN/H", "RUNS OUT"},
		[][]string{{b.Balance.String(), b.Held.String(), b.Available.String(), b.BurnPerHour.String(), runsOut}})
}
