package main

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gpuportal"
)

// Lists page through everything; labels; and the commands scripts need
// besides launching: extend, the waitlist, top-ups, drills, webhooks
// and the catalog.

// labelFlags is a repeatable --label k=v.
type labelFlags []string

func (l *labelFlags) String() string     { return strings.Join(*l, ",") }
func (l *labelFlags) Set(v string) error { *l = append(*l, v); return nil }

// labels is the flags as a launch's labels (the server checks them).
func (l labelFlags) labels() map[string]string {
	out := map[string]string{}
	for _, kv := range l {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// listFlags reads a list command's --limit N (0: all) and --label k=v.
func (c *cli) listFlags(name string, args []string) (url.Values, int, error) {
	fs := c.flags(name)
	limit := fs.Int("limit", 0, "")
	var labels labelFlags
	fs.Var(&labels, "label", "")
	if err := fs.Parse(args); err != nil || *limit < 0 {
		return nil, 0, usageError{c.T("%s takes --limit N (default: all) and --label KEY=VALUE", name)}
	}
	q := url.Values{}
	for _, l := range labels {
		q.Add("label", l)
	}
	return q, *limit, nil
}

// listPage is how many rows one request of a list asks for (the API's
// most).
const listPage = 500

// listAll reads a list a page at a time until it has every row (or
// limit of them, limit > 0): never a silent first page.
func listAll[T any](c *cli, path string, q url.Values, limit int) ([]T, error) {
	out := []T{}
	for {
		size := listPage
		if limit > 0 {
			size = min(size, limit-len(out))
		}
		q.Set("limit", strconv.Itoa(size))
		q.Set("offset", strconv.Itoa(len(out)))
		var page []T
		if err := c.call("GET", path+"?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < size || (limit > 0 && len(out) >= limit) || (c.total >= 0 && len(out) >= c.total) {
			return out, nil
		}
	}
}

// extend adds hours to a reservation (its added hours at today's prices).
func (c *cli) extend(args []string) error {
	id, err := c.idArg(args, "reservation")
	if err != nil {
		return err
	}
	fs := c.flags("extend")
	hours := fs.Int("hours", 0, "")
	if err := fs.Parse(args[1:]); err != nil || *hours < 1 {
		var ext struct {
			MaxHours int `json:"max_hours"`
			Options  []struct {
				Hours int           `json:"hours"`
				End   time.Time     `json:"end"`
				Price gpuportal.Fen `json:"price_fen"`
			} `json:"options"`
		}
		if err := c.call("GET", fmt.Sprintf("/reservations/%d/extension", id), nil, &ext); err != nil {
			return err
		}
		var rows [][]string
		for _, o := range ext.Options {
			rows = append(rows, []string{strconv.Itoa(o.Hours), o.End.Local().Format("2006-01-02 15:04"), o.Price.String()})
		}
		if c.json {
			return c.print(ext, nil, nil)
		}
		fmt.Fprintln(c.out, c.T("Reservation %d can be extended by up to %d hours; give --hours N:", id, ext.MaxHours))
		return c.print(ext, []string{"HOURS", "NEW END", "PRICE"}, rows)
	}
	var r gpuportal.Reservation
	if err := c.call("POST", fmt.Sprintf("/reservations/%d/extend", id), map[string]int{"hours": *hours}, &r); err != nil {
		return err
	}
	if c.json {
		return c.print(r, nil, nil)
	}
	fmt.Fprintln(c.out, c.T("Reservation %d now ends %s; it costs %s in all.", r.ID, r.End.Local().Format("2006-01-02 15:04"), r.Price.String()))
	return nil
}

// waitlist joins, lists, leaves and claims waitlist entries.
func (c *cli) waitlist(args []string) error {
	sub, args := subcommand(args)
	switch sub {
	case "list":
		list, err := listAll[gpuportal.WaitlistEntry](c, "/waitlist", url.Values{}, 0)
		if err != nil {
			return err
		}
		var rows [][]string
		for _, w := range list {
			when := w.Start.Local().Format("2006-01-02 15:04") + " – " + w.End.Local().Format("2006-01-02 15:04")
			if w.Flexible {
				when = c.T("%d h between %s and %s", w.DurationHours, w.Start.Local().Format("2006-01-02 15:04"), w.End.Local().Format("2006-01-02 15:04"))
			}
			offer := ""
			if w.OfferExpiresAt != nil && w.Status == gpuportal.WaitOffered {
				offer = c.T("claim by %s", w.OfferExpiresAt.Local().Format("15:04"))
			}
			rows = append(rows, []string{strconv.FormatInt(w.ID, 10), string(w.Status), fmt.Sprintf("%d × %s", w.Count, w.Model), when, strconv.FormatBool(w.AutoBook), offer})
		}
		return c.print(list, []string{"ID", "STATUS", "GPUS", "WHEN", "AUTO-BOOK", ""}, rows)
	case "join":
		fs := c.flags("waitlist join")
		model := fs.String("model", "", "")
		region := fs.String("region", "cd-1", "")
		count := fs.Int("count", 1, "")
		start := fs.String("start", "", "")
		end := fs.String("end", "", "")
		hours := fs.Int("hours", 0, "")
		flexible := fs.Bool("flexible", false, "")
		latestEnd := fs.String("latest-end", "", "")
		autoBook := fs.Bool("auto-book", false, "")
		if err := fs.Parse(args); err != nil || *model == "" || *start == "" {
			return usageError{c.T("waitlist join needs --model, --count and --start with --end or --hours (or --flexible --hours N --latest-end TIME)")}
		}
		from, err := c.siteTime("start", *start)
		if err != nil {
			return err
		}
		req := map[string]any{"model": *model, "region": *region, "count": *count}
		if *flexible {
			if *hours < 1 || *latestEnd == "" {
				return usageError{c.T("waitlist join --flexible needs --hours N and --latest-end TIME")}
			}
			to, err := c.siteTime("latest-end", *latestEnd)
			if err != nil {
				return err
			}
			req["duration_hours"], req["earliest"], req["latest_end"] = *hours, from.Format(time.RFC3339), to.Format(time.RFC3339)
		} else {
			to := from.Add(time.Duration(*hours) * time.Hour)
			if *end != "" {
				if to, err = c.siteTime("end", *end); err != nil {
					return err
				}
			} else if *hours < 1 {
				return usageError{c.T("waitlist join needs --model, --count and --start with --end or --hours (or --flexible --hours N --latest-end TIME)")}
			}
			req["start"], req["end"], req["auto_book"] = from.Format(time.RFC3339), to.Format(time.RFC3339), *autoBook
		}
		var w gpuportal.WaitlistEntry
		if err := c.call("POST", "/waitlist", req, &w); err != nil {
			return err
		}
		if c.json {
			return c.print(w, nil, nil)
		}
		fmt.Fprintln(c.out, c.T("On the waitlist as entry %d, position %d; you are told when GPUs free.", w.ID, w.Position))
		return nil
	case "leave":
		return c.deleteOne(args, "waitlist entry", "/waitlist/%d", "Left the waitlist (entry %d).")
	case "claim":
		id, err := c.idArg(args, "waitlist entry")
		if err != nil {
			return err
		}
		var r gpuportal.Reservation
		if err := c.call("POST", fmt.Sprintf("/waitlist/%d/claim", id), nil, &r); err != nil {
			return err
		}
		if c.json {
			return c.print(r, nil, nil)
		}
		fmt.Fprintln(c.out, c.T("Reservation %d booked: %d × %s, %s to %s, %s.", r.ID, r.Count, r.Model, r.Start.Local().Format("2006-01-02 15:04"), r.End.Local().Format("2006-01-02 15:04"), r.Price.String()))
		return nil
	}
	return usageError{c.T("unknown waitlist command %q", sub)}
}

// topup starts a top-up of AMOUNT yuan and prints where to pay it.
func (c *cli) topup(args []string) error {
	fs := c.flags("topup")
	provider := fs.String("provider", "", "")
	if len(args) == 0 {
		return usageError{c.T("topup needs the amount in yuan, e.g. gpu topup 500")}
	}
	amount, err := gpuportal.ParseYuan(args[0])
	if err != nil || amount <= 0 {
		return usageError{c.T("%q is not an amount in yuan", args[0])}
	}
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{err.Error()}
	}
	req := map[string]any{"amount_fen": amount}
	if *provider != "" {
		req["provider"] = *provider
	}
	var t gpuportal.TopUp
	if err := c.call("POST", "/topups", req, &t); err != nil {
		return err
	}
	if strings.HasPrefix(t.PayURL, "/") {
		// A portal without its public address set answers a path.
		if cfg, err := c.config(); err == nil {
			t.PayURL = strings.TrimRight(cfg.URL, "/") + t.PayURL
		}
	}
	if c.json {
		return c.print(t, nil, nil)
	}
	fmt.Fprintln(c.out, c.T("Top-up %d of %s: pay at %s", t.ID, t.Amount.String(), t.PayURL))
	return nil
}

// drill gives one's own running spot instance a practice notice.
func (c *cli) drill(args []string) error {
	id, err := c.instanceArg(args)
	if err != nil {
		return err
	}
	var d struct {
		NoticeAt time.Time `json:"notice_at"`
		Deadline time.Time `json:"deadline"`
	}
	if err := c.call("POST", fmt.Sprintf("/instances/%d/drill", id), nil, &d); err != nil {
		return err
	}
	if c.json {
		return c.print(d, nil, nil)
	}
	fmt.Fprintln(c.out, c.T("Drill started on instance %d: the notice shows in its metadata until %s (nothing is stopped); gpu instances shows the result.", id, d.Deadline.Local().Format("15:04:05")))
	return nil
}

// catalog prints GET /catalog.
func (c *cli) catalog(args []string) error {
	var list []gpuportal.CatalogEntry
	if err := c.call("GET", "/catalog", nil, &list); err != nil {
		return err
	}
	var rows [][]string
	for _, e := range list {
		next := "-"
		if e.NextFreeStart != nil {
			next = e.NextFreeStart.Local().Format("2006-01-02 15:04")
		}
		rows = append(rows, []string{e.Model, e.Region, strconv.Itoa(e.GPUsPerNode), e.Price.String(), e.SpotPrice.String(),
			strconv.Itoa(e.FreeNow), strconv.Itoa(e.SpotFreeNow), fmt.Sprintf("%.1f %%", e.SpotInterruptionRate30d*100), next})
	}
	return c.print(list, []string{"MODEL", "REGION", "GPUS/NODE", "PRICE/GPU-H", "SPOT", "FREE", "SPOT FREE", "SPOT INTERRUPTED (30 D)", "NEXT WHOLE NODE"}, rows)
}

// webhooks lists, adds, tests and deletes webhooks, and shows and resends
// their deliveries.
func (c *cli) webhooks(args []string) error {
	sub, args := subcommand(args)
	switch sub {
	case "list":
		var list []gpuportal.Webhook
		if err := c.call("GET", "/webhooks", nil, &list); err != nil {
			return err
		}
		var rows [][]string
		for _, w := range list {
			rows = append(rows, []string{strconv.FormatInt(w.ID, 10), w.URL, strings.Join(w.Events, ","), strconv.Itoa(w.Failures)})
		}
		return c.print(list, []string{"ID", "URL", "EVENTS", "FAILING"}, rows)
	case "add":
		fs := c.flags("webhooks add")
		events := fs.String("events", "*", "")
		if len(args) == 0 {
			return usageError{c.T("webhooks add needs the endpoint's URL (and --events a,b; default all)")}
		}
		target := args[0]
		if err := fs.Parse(args[1:]); err != nil {
			return usageError{err.Error()}
		}
		var w gpuportal.Webhook
		if err := c.call("POST", "/webhooks", map[string]any{"url": target, "events": strings.Split(*events, ",")}, &w); err != nil {
			return err
		}
		return c.showSecret(w)
	case "roll":
		id, err := c.idArg(args, "webhook")
		if err != nil {
			return err
		}
		var w gpuportal.Webhook
		if err := c.call("POST", fmt.Sprintf("/webhooks/%d/secret", id), nil, &w); err != nil {
			return err
		}
		return c.showSecret(w)
	case "delete":
		return c.deleteOne(args, "webhook", "/webhooks/%d", "Webhook %d deleted.")
	case "test":
		id, err := c.idArg(args, "webhook")
		if err != nil {
			return err
		}
		var d gpuportal.WebhookDelivery
		if err := c.call("POST", fmt.Sprintf("/webhooks/%d/test", id), nil, &d); err != nil {
			return err
		}
		if c.json {
			return c.print(d, nil, nil)
		}
		fmt.Fprintln(c.out, c.T("Test event %d queued as delivery %d; gpu webhooks deliveries %d shows how it went.", d.EventID, d.ID, id))
		return nil
	case "deliveries":
		id, err := c.idArg(args, "webhook")
		if err != nil {
			return err
		}
		q, limit, err := c.listFlags("webhooks deliveries", args[1:])
		if err != nil {
			return err
		}
		list, err := listAll[gpuportal.WebhookDelivery](c, fmt.Sprintf("/webhooks/%d/deliveries", id), q, limit)
		if err != nil {
			return err
		}
		var rows [][]string
		for _, d := range list {
			code := "-"
			if d.StatusCode != nil {
				code = strconv.Itoa(*d.StatusCode)
			}
			rows = append(rows, []string{strconv.FormatInt(d.ID, 10), strconv.FormatInt(d.EventID, 10), d.Type, d.Status, code, strconv.Itoa(d.Attempts), d.CreatedAt.Local().Format("2006-01-02 15:04:05")})
		}
		return c.print(list, []string{"ID", "EVENT", "TYPE", "STATUS", "HTTP", "ATTEMPTS", "CREATED"}, rows)
	case "redeliver":
		if len(args) < 2 {
			return usageError{c.T("webhooks redeliver needs the webhook's ID and the delivery's ID")}
		}
		id, err := c.idArg(args, "webhook")
		if err != nil {
			return err
		}
		delivery, err := c.idArg(args[1:], "delivery")
		if err != nil {
			return err
		}
		var d gpuportal.WebhookDelivery
		if err := c.call("POST", fmt.Sprintf("/webhooks/%d/deliveries/%d/redeliver", id, delivery), nil, &d); err != nil {
			return err
		}
		if c.json {
			return c.print(d, nil, nil)
		}
		fmt.Fprintln(c.out, c.T("Event %d sent again as delivery %d.", d.EventID, d.ID))
		return nil
	}
	return usageError{c.T("unknown webhooks command %q", sub)}
}

func (c *cli) showSecret(w gpuportal.Webhook) error {
	if c.json {
		return c.print(w, nil, nil)
	}
	fmt.Fprintln(c.out, c.T("Webhook %d sends %s to %s.", w.ID, strings.Join(w.Events, ","), w.URL))
	fmt.Fprintln(c.out, c.T("Its signing secret (shown this once): %s", w.Secret))
	return nil
}

// deleteOne deletes what args names by its ID (path: the route, with %d
// for it) and says so (done: the message, with %d for the ID; its words
// are in the translations).
func (c *cli) deleteOne(args []string, what, path, done string) error {
	id, err := c.idArg(args, what)
	if err != nil {
		return err
	}
	if err := c.call("DELETE", fmt.Sprintf(path, id), nil, nil); err != nil {
		return err
	}
	fmt.Fprintln(c.out, c.T(done, id))
	return nil
}

// subcommand splits a command's arguments into its subcommand ("list"
// when none is given) and the rest.
func subcommand(args []string) (string, []string) {
	if len(args) == 0 {
		return "list", nil
	}
	return args[0], args[1:]
}
