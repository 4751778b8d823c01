package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"gpuportal"
)

// Booking, jobs, volumes and shell completion: the rest of `gpu`.

// siteTime reads a time as a script writes it: RFC 3339, or
// "2006-01-02T15:04" / "2006-01-02 15:04" in the local zone (sent to the
// portal with its offset, so no route reads it another way).
func (c *cli) siteTime(name, v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, v, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usageError{c.T("--%s %q is not a time (2026-12-24T10:00 or RFC 3339)", name, v)}
}

func (c *cli) availability(args []string) error {
	fs := c.flags("availability")
	model := fs.String("model", "", "")
	region := fs.String("region", "cd-1", "")
	from := fs.String("from", "", "")
	hours := fs.Int("hours", 24, "")
	if err := fs.Parse(args); err != nil || *model == "" || *hours < 1 {
		return usageError{c.T("availability needs --model (and optionally --region, --from, --hours)")}
	}
	start := time.Now().Truncate(time.Hour).Add(time.Hour)
	if *from != "" {
		var err error
		if start, err = c.siteTime("from", *from); err != nil {
			return err
		}
	}
	q := url.Values{"model": {*model}, "region": {*region}, "from": {start.Format(time.RFC3339)}, "to": {start.Add(time.Duration(*hours) * time.Hour).Format(time.RFC3339)}}
	var out struct {
		Slots []struct {
			Start    time.Time     `json:"start"`
			Capacity int           `json:"capacity"`
			Free     int           `json:"free"`
			Price    gpuportal.Fen `json:"price_per_gpu_hour_fen"`
			OffPeak  bool          `json:"off_peak"`
		} `json:"slots"`
	}
	if err := c.call("GET", "/availability?"+q.Encode(), nil, &out); err != nil {
		return err
	}
	var rows [][]string
	for _, s := range out.Slots {
		off := ""
		if s.OffPeak {
			off = c.T("off-peak")
		}
		rows = append(rows, []string{s.Start.Local().Format("2006-01-02 15:04"), fmt.Sprintf("%d/%d", s.Free, s.Capacity), s.Price.String(), off})
	}
	return c.print(out, []string{"HOUR", "FREE", "PRICE/GPU-H", ""}, rows)
}

func (c *cli) offerings(args []string) error {
	fs := c.flags("offerings")
	model := fs.String("model", "", "")
	region := fs.String("region", "cd-1", "")
	count := fs.Int("count", 1, "")
	hours := fs.Int("hours", 0, "")
	sort := fs.String("sort", "price", "")
	limit := fs.Int("limit", 5, "")
	if err := fs.Parse(args); err != nil || *model == "" || *hours < 1 {
		return usageError{c.T("offerings needs --model and --hours (and optionally --count, --sort price|start)")}
	}
	q := url.Values{"model": {*model}, "region": {*region}, "count": {strconv.Itoa(*count)}, "duration_hours": {strconv.Itoa(*hours)},
		"sort": {*sort}, "limit": {strconv.Itoa(*limit)}}
	var list []gpuportal.Offering
	if err := c.call("GET", "/offerings?"+q.Encode(), nil, &list); err != nil {
		return err
	}
	var rows [][]string
	for _, o := range list {
		rows = append(rows, []string{o.Start.Local().Format("2006-01-02 15:04"), o.End.Local().Format("2006-01-02 15:04"), o.Total.String(), o.Saving.String()})
	}
	return c.print(list, []string{"START", "END", "TOTAL", "SAVING"}, rows)
}

func (c *cli) book(args []string) error {
	fs := c.flags("book")
	model := fs.String("model", "", "")
	region := fs.String("region", "cd-1", "")
	count := fs.Int("count", 1, "")
	start := fs.String("start", "", "")
	end := fs.String("end", "", "")
	hours := fs.Int("hours", 0, "")
	resume := fs.Int64("resume", 0, "")
	offering := fs.Int("offering", 0, "")
	sortBy := fs.String("sort", "price", "")
	var labels labelFlags
	fs.Var(&labels, "label", "")
	if err := fs.Parse(args); err != nil || *model == "" || (*offering > 0 && *hours < 1) ||
		(*offering == 0 && (*start == "" || (*end == "") == (*hours == 0))) {
		return usageError{c.T("book needs --model, --count, --start and --end (or --hours); or --offering N with --hours, the N-th window gpu offerings lists")}
	}
	var from, to time.Time
	var err error
	if *offering > 0 {
		// The N-th window `gpu offerings` lists with the same flags.
		q := url.Values{"model": {*model}, "region": {*region}, "count": {strconv.Itoa(*count)}, "duration_hours": {strconv.Itoa(*hours)},
			"sort": {*sortBy}, "limit": {strconv.Itoa(*offering)}}
		var list []gpuportal.Offering
		if err := c.call("GET", "/offerings?"+q.Encode(), nil, &list); err != nil {
			return err
		}
		if len(list) < *offering {
			return fmt.Errorf("%s", c.T("only %d windows fit; there is no offering %d", len(list), *offering))
		}
		from, to = list[*offering-1].Start, list[*offering-1].End
	} else {
		if from, err = c.siteTime("start", *start); err != nil {
			return err
		}
		to = from.Add(time.Duration(*hours) * time.Hour)
		if *end != "" {
			if to, err = c.siteTime("end", *end); err != nil {
				return err
			}
		}
	}
	req := map[string]any{"model": *model, "region": *region, "count": *count, "start": from.Format(time.RFC3339), "end": to.Format(time.RFC3339)}
	if len(labels) > 0 {
		req["labels"] = labels.labels()
	}
	if *resume > 0 {
		// Book your resume: the stopped instance starts on these GPUs.
		req["launch"] = map[string]int64{"resume_instance_id": *resume}
	}
	var r gpuportal.Reservation
	if err := c.call("POST", "/reservations", req, &r); err != nil {
		return err
	}
	if c.json {
		return c.print(r, nil, nil)
	}
	fmt.Fprintln(c.out, c.T("Reservation %d booked: %d × %s, %s to %s, %s.", r.ID, r.Count, r.Model, r.Start.Local().Format("2006-01-02 15:04"), r.End.Local().Format("2006-01-02 15:04"), r.Price.String()))
	return nil
}

func (c *cli) reservations(args []string) error {
	q, limit, err := c.listFlags("reservations", args)
	if err != nil {
		return err
	}
	list, err := listAll[gpuportal.Reservation](c, "/reservations", q, limit)
	if err != nil {
		return err
	}
	var rows [][]string
	for _, r := range list {
		rows = append(rows, []string{strconv.FormatInt(r.ID, 10), string(r.Status), fmt.Sprintf("%d × %s", r.Count, r.Model),
			r.Start.Local().Format("2006-01-02 15:04"), r.End.Local().Format("2006-01-02 15:04"), r.Price.String()})
	}
	return c.print(list, []string{"ID", "STATUS", "GPUS", "START", "END", "PRICE"}, rows)
}

// idArg is a command's numeric ID argument.
func (c *cli) idArg(args []string, what string) (int64, error) {
	if len(args) == 0 {
		return 0, usageError{c.T("which %s? give its ID", c.T(what))}
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id <= 0 {
		return 0, usageError{c.T("%q is not an ID", args[0])}
	}
	return id, nil
}

func (c *cli) cancel(args []string) error {
	id, err := c.idArg(args, "reservation")
	if err != nil {
		return err
	}
	var out struct {
		Status string        `json:"status"`
		Fee    gpuportal.Fen `json:"fee_fen"`
		Refund gpuportal.Fen `json:"refund_fen"`
	}
	if err := c.call("POST", fmt.Sprintf("/reservations/%d/cancel", id), nil, &out); err != nil {
		return err
	}
	if c.json {
		return c.print(out, nil, nil)
	}
	fmt.Fprintln(c.out, c.T("Reservation %d cancelled: fee %s, refund %s.", id, out.Fee.String(), out.Refund.String()))
	return nil
}

// jobs is `gpu jobs [list|submit|show ID|cancel ID]`.
func (c *cli) jobs(args []string) error {
	sub, args := subcommand(args)
	switch sub {
	case "list":
		q, limit, err := c.listFlags("jobs list", args)
		if err != nil {
			return err
		}
		list, err := listAll[gpuportal.Job](c, "/jobs", q, limit)
		if err != nil {
			return err
		}
		var rows [][]string
		for _, j := range list {
			rows = append(rows, []string{strconv.FormatInt(j.ID, 10), j.Title(), string(j.Status),
				fmt.Sprintf("%d/%d", j.Tasks.Succeeded, j.Tasks.Total), j.Cost.String()})
		}
		return c.print(list, []string{"ID", "NAME", "STATUS", "DONE", "COST"}, rows)
	case "show":
		id, err := c.idArg(args, "job")
		if err != nil {
			return err
		}
		var j gpuportal.Job
		if err := c.call("GET", fmt.Sprintf("/jobs/%d", id), nil, &j); err != nil {
			return err
		}
		return c.print(j, []string{"ID", "NAME", "STATUS", "QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "COST"},
			[][]string{{strconv.FormatInt(j.ID, 10), j.Title(), string(j.Status), strconv.Itoa(j.Tasks.Queued), strconv.Itoa(j.Tasks.Running),
				strconv.Itoa(j.Tasks.Succeeded), strconv.Itoa(j.Tasks.Failed), j.Cost.String()}})
	case "cancel":
		id, err := c.idArg(args, "job")
		if err != nil {
			return err
		}
		var j gpuportal.Job
		if err := c.call("POST", fmt.Sprintf("/jobs/%d/cancel", id), nil, &j); err != nil {
			return err
		}
		if c.json {
			return c.print(j, nil, nil)
		}
		fmt.Fprintln(c.out, c.T("Job %d cancelled.", id))
		return nil
	case "submit":
		fs := c.flags("jobs submit")
		name := fs.String("name", "", "")
		model := fs.String("model", "", "")
		region := fs.String("region", "cd-1", "")
		gpus := fs.Int("gpus", 1, "")
		tasks := fs.Int("tasks", 0, "")
		parallel := fs.Int("parallel", 4, "")
		kind := fs.String("kind", "spot", "")
		image := fs.String("image", "", "")
		volume := fs.Int64("volume", 0, "")
		disk := fs.Int("disk", 0, "")
		var labels labelFlags
		fs.Var(&labels, "label", "")
		if err := fs.Parse(args); err != nil || *model == "" || *tasks < 1 || len(fs.Args()) == 0 {
			return usageError{c.T("jobs submit needs --model, --tasks and a command (after --)")}
		}
		req := map[string]any{"name": *name, "model": *model, "region": *region, "gpus_per_task": *gpus, "tasks": *tasks,
			"max_parallel": *parallel, "kind": *kind, "command": strings.Join(fs.Args(), " ")}
		if *image != "" {
			req["image"] = *image
		}
		if *volume > 0 {
			req["volumes"] = []map[string]int64{{"id": *volume}}
		}
		if *disk != 0 {
			req["disk_gib"] = *disk
		}
		if len(labels) > 0 {
			req["labels"] = labels.labels()
		}
		var j gpuportal.Job
		if err := c.call("POST", "/jobs", req, &j); err != nil {
			return err
		}
		if c.json {
			return c.print(j, nil, nil)
		}
		fmt.Fprintln(c.out, c.T("Job %d submitted: %d tasks.", j.ID, j.Tasks.Total))
		return nil
	}
	return usageError{c.T("jobs takes list, submit, show ID or cancel ID")}
}

// followLogs prints an instance's log as it grows until the instance
// ends (`gpu logs -f`): the node's whole log, fetched again every poll,
// with what was printed already left out.
func (c *cli) followLogs(id int64, every time.Duration) error {
	var offset int64
	for {
		ended := false
		var inst gpuportal.Instance
		if err := c.call("GET", fmt.Sprintf("/instances/%d", id), nil, &inst); err != nil {
			return err
		}
		ended = inst.EndedAt != nil
		// Only what is new since the last read: the log from offset,
		// headed by where it starts (past the offset when a trim dropped
		// what was there) and ends.
		err := c.call("GET", fmt.Sprintf("/instances/%d/log?offset=%d", id, offset), nil, logAppender{c, &offset})
		var ae *apiError
		switch {
		case err == nil:
		case asAPIError(err, &ae) && ae.Status == http.StatusConflict && !ended:
			// Not started yet: wait for it.
		default:
			return err
		}
		if ended {
			return nil // read after it ended: all of it
		}
		time.Sleep(every)
	}
}

// logAppender writes a log answer's body and moves the offset to its
// X-Log-End, saying so when a trim skipped output.
type logAppender struct {
	c      *cli
	offset *int64
}

func (l logAppender) answer(h http.Header, body io.Reader) error {
	start, _ := strconv.ParseInt(h.Get("X-Log-Start"), 10, 64)
	end, err := strconv.ParseInt(h.Get("X-Log-End"), 10, 64)
	if err != nil {
		return fmt.Errorf("the portal did not say where the log ends (X-Log-End)")
	}
	if start > *l.offset {
		fmt.Fprintln(l.c.errOut, l.c.T("[gpu: %d bytes of output were dropped from the log before they could be read]", start-*l.offset))
	}
	if _, err := io.Copy(l.c.out, body); err != nil {
		return err
	}
	*l.offset = end
	return nil
}

// volumes is `gpu volumes [list|create NAME --size GIB|delete ID|ls ID [PATH]]`.
func (c *cli) volumes(args []string) error {
	sub, args := subcommand(args)
	switch sub {
	case "list":
		list, err := listAll[gpuportal.Volume](c, "/volumes", url.Values{}, 0)
		if err != nil {
			return err
		}
		var rows [][]string
		for _, v := range list {
			rows = append(rows, []string{strconv.FormatInt(v.ID, 10), v.Name, v.Region, fmt.Sprintf("%d GiB", v.SizeGiB),
				strconv.FormatInt(v.UsedBytes, 10), v.Status, v.CostPerHour.String()})
		}
		return c.print(list, []string{"ID", "NAME", "REGION", "SIZE", "USED BYTES", "STATUS", "PER HOUR"}, rows)
	case "create":
		fs := c.flags("volumes create")
		size := fs.Int("size", 0, "")
		region := fs.String("region", "cd-1", "")
		if len(args) == 0 {
			return usageError{c.T("volumes create needs a NAME and --size GIB")}
		}
		name := args[0]
		if err := fs.Parse(args[1:]); err != nil || *size < 1 {
			return usageError{c.T("volumes create needs a NAME and --size GIB")}
		}
		var v gpuportal.Volume
		if err := c.call("POST", "/volumes", map[string]any{"name": name, "region": *region, "size_gib": *size}, &v); err != nil {
			return err
		}
		if c.json {
			return c.print(v, nil, nil)
		}
		fmt.Fprintln(c.out, c.T("Volume %d (%s, %d GiB) created; mount it with --volume %d.", v.ID, v.Name, v.SizeGiB, v.ID))
		return nil
	case "delete":
		return c.deleteOne(args, "volume", "/volumes/%d", "Volume %d deleted.")
	case "ls":
		id, err := c.idArg(args, "volume")
		if err != nil {
			return err
		}
		p := ""
		if len(args) > 1 {
			p = args[1]
		}
		var list []gpuportal.VolumeFile
		if err := c.call("GET", fmt.Sprintf("/volumes/%d/files?path=%s", id, url.QueryEscape(p)), nil, &list); err != nil {
			return err
		}
		var rows [][]string
		for _, f := range list {
			name := f.Name
			if f.IsDir {
				name += "/"
			}
			rows = append(rows, []string{name, strconv.FormatInt(f.Size, 10), f.ModifiedAt.Local().Format("2006-01-02 15:04")})
		}
		return c.print(list, []string{"NAME", "BYTES", "MODIFIED"}, rows)
	}
	return usageError{c.T("volumes takes list, create NAME --size GIB, delete ID or ls ID [PATH]")}
}

// volumePathArg reads "vol:ID:PATH" (a file of a volume).
func volumePathArg(s string) (int64, string, bool) {
	rest, ok := strings.CutPrefix(s, "vol:")
	if !ok {
		return 0, "", false
	}
	idStr, p, ok := strings.Cut(rest, ":")
	id, err := strconv.ParseInt(idStr, 10, 64)
	if !ok || err != nil || id <= 0 {
		return 0, "", false
	}
	return id, strings.TrimPrefix(p, "/"), true
}

// cp copies a file into or out of a volume over the HTTPS API (the same
// files as `sftp volume-ID@…`, with the API token instead of an SSH key):
// gpu cp LOCAL vol:ID:PATH, gpu cp vol:ID:PATH LOCAL ("-" is stdin/stdout).
func (c *cli) cp(args []string) error {
	// --progress (or a terminal on stderr): how far the copy is, on stderr.
	show := c.errIsTerminal()
	if i := slices.Index(args, "--progress"); i >= 0 {
		show, args = true, slices.Delete(slices.Clone(args), i, i+1)
	}
	if len(args) != 2 {
		return usageError{c.T("cp takes a source and a destination, one of them vol:ID:PATH")}
	}
	srcID, srcPath, srcVol := volumePathArg(args[0])
	dstID, dstPath, dstVol := volumePathArg(args[1])
	switch {
	case dstVol && !srcVol:
		var in io.Reader = c.stdin
		size := int64(-1)
		if args[0] != "-" {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			if st, err := f.Stat(); err == nil {
				size = st.Size()
			}
			in = bufio.NewReaderSize(f, 1<<20)
			if dstPath == "" || strings.HasSuffix(dstPath, "/") {
				dstPath += path.Base(args[0])
			}
		}
		var out gpuportal.VolumeFile
		if show {
			p := c.newProgress(args[0], size)
			in = io.TeeReader(in, p)
			defer p.finish()
		}
		if err := c.upload(fmt.Sprintf("/volumes/%d/files/content?path=%s", dstID, url.QueryEscape(dstPath)), in, size, &out); err != nil {
			return err
		}
		if c.json {
			return c.print(out, nil, nil)
		}
		fmt.Fprintln(c.out, c.T("Copied %d bytes to volume %d: %s.", out.Size, dstID, out.Name))
		return nil
	case srcVol && !dstVol:
		out := c.out
		if args[1] != "-" {
			f, err := os.Create(args[1])
			if err != nil {
				return err
			}
			defer f.Close()
			out = f
		}
		if !show {
			return c.call("GET", fmt.Sprintf("/volumes/%d/files/content?path=%s", srcID, url.QueryEscape(srcPath)), nil, out)
		}
		return c.call("GET", fmt.Sprintf("/volumes/%d/files/content?path=%s", srcID, url.QueryEscape(srcPath)), nil, progressCopy{c, args[0], out})
	}
	return usageError{c.T("cp takes a source and a destination, one of them vol:ID:PATH")}
}

// upload PUTs a body (streamed) to the API.
func (c *cli) upload(apiPath string, body io.Reader, size int64, out any) error {
	cfg, err := c.config()
	if err != nil {
		return err
	}
	req, err := http.NewRequest("PUT", strings.TrimRight(cfg.URL, "/")+"/api/v1"+apiPath, body)
	if err != nil {
		return usageError{err.Error()}
	}
	if size >= 0 {
		req.ContentLength = size
	}
	return c.send(cfg, req, out)
}

// commandNames are the commands' names (set from commands at start:
// completion is one of them).
var commandNames []string

// commandSummaries are their summaries, by name (fish shows them).
var commandSummaries = map[string]string{}

func init() {
	for _, cmd := range commands {
		commandNames = append(commandNames, cmd.name)
		commandSummaries[cmd.name] = cmd.summary
	}
}

// completion prints a shell completion script for bash, zsh or fish.
func (c *cli) completion(args []string) error {
	shell := "bash"
	if len(args) > 0 {
		shell = args[0]
	}
	names := strings.Join(commandNames, " ")
	switch shell {
	case "bash":
		fmt.Fprintf(c.out, `# gpu completion for bash: eval "$(gpu completion)"
_gpu() {
  local cur="${COMP_WORDS[COMP_CWORD]}"
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=( $(compgen -W "%s --json --output --team help" -- "$cur") )
    return
  fi
  case "${COMP_WORDS[1]}" in
%s    cp|logs) COMPREPLY=( $(compgen -f -- "$cur") ) ;;
  esac
}
complete -F _gpu gpu
`, names, bashSubcommands())
	case "zsh":
		fmt.Fprintf(c.out, `#compdef gpu
# gpu completion for zsh: gpu completion zsh > "${fpath[1]}/_gpu"
_gpu() {
  if (( CURRENT == 2 )); then
    compadd -- %s --json --output --team help
    return
  fi
  case ${words[2]} in
%s    cp|logs) _files ;;
  esac
}
compdef _gpu gpu
`, names, zshSubcommands())
	case "fish":
		fmt.Fprintf(c.out, "# gpu completion for fish: gpu completion fish | source\ncomplete -c gpu -f\n")
		for _, name := range commandNames {
			fmt.Fprintf(c.out, "complete -c gpu -n __fish_use_subcommand -a %s -d %q\n", name, commandSummaries[name])
		}
		for _, name := range sortedKeys(subcommands) {
			fmt.Fprintf(c.out, "complete -c gpu -n '__fish_seen_subcommand_from %s' -a %q\n", name, strings.Join(subcommands[name], " "))
		}
		fmt.Fprintln(c.out, "complete -c gpu -l json -d 'print JSON'")
		fmt.Fprintln(c.out, "complete -c gpu -l team -d 'act for a team' -r")
	default:
		return usageError{c.T("completion is for bash, zsh or fish")}
	}
	return nil
}

// subcommands are the second words of the commands that take them.
var subcommands = map[string][]string{
	"jobs":     {"list", "submit", "show", "cancel"},
	"volumes":  {"list", "create", "delete", "ls"},
	"images":   {"list", "import", "save", "show", "delete"},
	"team":     {"list", "create", "use", "members", "invite", "accept", "limit", "remove"},
	"waitlist": {"list", "join", "leave", "claim"},
	"webhooks": {"list", "add", "delete", "test", "roll", "deliveries", "redeliver"},
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func bashSubcommands() string {
	var b strings.Builder
	for _, name := range sortedKeys(subcommands) {
		fmt.Fprintf(&b, "    %s) [ \"$COMP_CWORD\" -eq 2 ] && COMPREPLY=( $(compgen -W \"%s\" -- \"$cur\") ) ;;\n", name, strings.Join(subcommands[name], " "))
	}
	return b.String()
}

func zshSubcommands() string {
	var b strings.Builder
	for _, name := range sortedKeys(subcommands) {
		fmt.Fprintf(&b, "    %s) (( CURRENT == 3 )) && compadd -- %s ;;\n", name, strings.Join(subcommands[name], " "))
	}
	return b.String()
}

// images lists the catalog and your own images, imports one from a
// volume's archive, shows or deletes one of yours.
func (c *cli) images(args []string) error {
	sub, args := subcommand(args)
	switch sub {
	case "list":
		var list []gpuportal.Image
		if err := c.call("GET", "/images", nil, &list); err != nil {
			return err
		}
		var rows [][]string
		for _, im := range list {
			owner := "catalog"
			if im.Owner != "" {
				owner = im.Owner
			}
			size := ""
			if im.SizeBytes > 0 {
				size = strconv.FormatInt(im.SizeBytes, 10)
			}
			rows = append(rows, []string{im.ID, im.Name, owner, im.Status, size, im.Error})
		}
		return c.print(list, []string{"ID", "NAME", "OWNER", "STATUS", "SIZE BYTES", "ERROR"}, rows)
	case "import":
		fs := c.flags("images import")
		volume := fs.Int64("volume", 0, "")
		path := fs.String("path", "", "")
		if len(args) == 0 {
			return usageError{c.T("images import needs a NAME, --volume ID and --path PATH")}
		}
		name := args[0]
		if err := fs.Parse(args[1:]); err != nil || *volume < 1 || *path == "" {
			return usageError{c.T("images import needs a NAME, --volume ID and --path PATH")}
		}
		var im gpuportal.Image
		if err := c.call("POST", "/images", map[string]any{"name": name, "volume_id": *volume, "path": *path}, &im); err != nil {
			return err
		}
		if c.json {
			return c.print(im, nil, nil)
		}
		fmt.Fprintln(c.out, c.T("Image %s is being imported; gpu images show %s says when it is ready.", im.ID, im.ID))
		return nil
	case "save":
		if len(args) < 2 {
			return usageError{c.T("images save needs an instance ID and a NAME")}
		}
		id, err := c.instanceArg(args)
		if err != nil {
			return err
		}
		var im gpuportal.Image
		if err := c.call("POST", fmt.Sprintf("/instances/%d/images", id), map[string]string{"name": strings.Join(args[1:], " ")}, &im); err != nil {
			return err
		}
		if c.json {
			return c.print(im, nil, nil)
		}
		fmt.Fprintln(c.out, c.T("Image %s is being saved from instance %d; gpu images show %s says when it is ready.", im.ID, id, im.ID))
		return nil
	case "show", "delete":
		if len(args) == 0 || !strings.HasPrefix(args[0], "img-") {
			return usageError{c.T("which image? give its ID (img-N)")}
		}
		if sub == "delete" {
			if err := c.call("DELETE", "/images/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			fmt.Fprintln(c.out, c.T("Image %s deleted.", args[0]))
			return nil
		}
		var im gpuportal.Image
		if err := c.call("GET", "/images/"+url.PathEscape(args[0]), nil, &im); err != nil {
			return err
		}
		return c.print(im, []string{"ID", "NAME", "REGION", "STATUS", "SIZE BYTES", "ERROR"},
			[][]string{{im.ID, im.Name, im.Region, im.Status, strconv.FormatInt(im.SizeBytes, 10), im.Error}})
	}
	return usageError{c.T("images takes list, import NAME --volume ID --path PATH, save INSTANCE NAME, show ID or delete ID")}
}

// progress writes how far a copy is to stderr: at most five times a
// second, and once at the end.
type progress struct {
	c           *cli
	what        string
	total, done int64 // total < 0: unknown
	last        time.Time
}

func (c *cli) newProgress(what string, total int64) *progress {
	return &progress{c: c, what: what, total: total}
}

func (p *progress) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	if time.Since(p.last) >= 200*time.Millisecond {
		p.print()
	}
	return len(b), nil
}

func (p *progress) print() {
	p.last = time.Now()
	if p.total > 0 {
		fmt.Fprintf(p.c.errOut, "\r%s  %s / %s  %d %%", p.what, mib(p.done), mib(p.total), p.done*100/p.total)
		return
	}
	fmt.Fprintf(p.c.errOut, "\r%s  %s", p.what, mib(p.done))
}

func (p *progress) finish() {
	p.print()
	fmt.Fprintln(p.c.errOut)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// progressCopy is a download's body written to out with its progress.
type progressCopy struct {
	c    *cli
	what string
	out  io.Writer
}

func (d progressCopy) answer(h http.Header, body io.Reader) error {
	total, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64)
	if err != nil {
		total = -1
	}
	p := d.c.newProgress(d.what, total)
	defer p.finish()
	_, err = io.Copy(io.MultiWriter(d.out, p), body)
	return err
}

// errIsTerminal reports whether stderr is a terminal (progress is shown
// there by itself).
func (c *cli) errIsTerminal() bool {
	f, ok := c.errOut.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
