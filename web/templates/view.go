// Package templates holds the portal's templ components. Each page takes one
// view-model struct; what every page needs (the user, language, CSRF token,
// flashes) travels in the request context as a *View.
package templates

import (
	"context"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gpuportal"
	"gpuportal/i18n"
)

// Flash is a one-time message shown on the next page.
type Flash struct {
	Kind string // success, error or info
	Text string
}

// View is what the layout needs to know about the request.
type View struct {
	User      *gpuportal.User
	Lang      string
	CSRF      string
	Flashes   []Flash
	Path      string
	Here      string         // the page's address with its query, to come back to
	Location  *time.Location // the site time zone
	TestClock bool
	Now       time.Time
	Available *gpuportal.Fen // the user's available balance, for the navigation bar
	// ModelNames names the catalog's models by id (a page shows names,
	// never ids).
	ModelNames map[string]string
	// RegionNames names the regions by id, as ModelNames the models.
	RegionNames map[string]string
	// Unread is how many in-app notifications the user has not seen.
	Unread int
	// Offer is the user's waitlist offer that lapses first, if one is
	// held: the navigation counts it down with its price.
	Offer *NavOffer
	// Person is who is signed in (User is a team's account while they act
	// for it); Teams are their teams, Team the one they act for (nil:
	// themselves), for the header's switcher.
	Person *gpuportal.User
	Teams  []gpuportal.Team
	Team   *gpuportal.Acting
}

// NavOffer is a held waitlist offer as the navigation shows it.
type NavOffer struct {
	Expires time.Time
	Price   gpuportal.Fen // what claiming it costs now
}

// ModelName is a model's name, or its id when the catalog has none.
func ModelName(ctx context.Context, id string) string {
	if name := ViewOf(ctx).ModelNames[id]; name != "" {
		return name
	}
	return id
}

// RegionName is a region's name in the reader's language ("Chengdu 1",
// "成都一区"), or its id when the catalog has none.
func RegionName(ctx context.Context, id string) string {
	if name := ViewOf(ctx).RegionNames[id]; name != "" {
		return T(ctx, name)
	}
	return id
}

// StatusWord is a status code as a word in the reader's language
// ("Running", "运行中"), never the code itself. It takes any of the typed
// statuses (an instance's, a reservation's, a job's, ...).
func StatusWord[S ~string](ctx context.Context, code S) string {
	status := string(code)
	if w := T(ctx, status); w != status {
		return w
	}
	w := strings.ReplaceAll(status, "_", " ")
	if w == "" {
		return w
	}
	return strings.ToUpper(w[:1]) + w[1:]
}

type viewKey struct{}

// WithView stores v in ctx (and its language, for i18n.Tc).
func WithView(ctx context.Context, v *View) context.Context {
	return i18n.WithLang(context.WithValue(ctx, viewKey{}, v), v.Lang)
}

// ViewOf returns the request's View (an empty one outside a request).
func ViewOf(ctx context.Context) *View {
	if v, ok := ctx.Value(viewKey{}).(*View); ok {
		return v
	}
	return &View{Lang: gpuportal.LangEnglish, Location: time.UTC}
}

// T translates key into the request's language.
func T(ctx context.Context, key string, args ...any) string { return i18n.Tc(ctx, key, args...) }

// FieldErrors maps a form field to its message, for forms shown again after
// an error.
type FieldErrors map[string]string

// LocalTime formats t in the site time zone, e.g. "2026-12-01 16:00".
func LocalTime(ctx context.Context, t time.Time) string {
	loc := ViewOf(ctx).Location
	if loc == nil {
		loc = time.UTC
	}
	return t.In(loc).Format("2006-01-02 15:04")
}

func navActive(ctx context.Context, prefix string) string {
	p := ViewOf(ctx).Path
	if p == prefix || (prefix != "/" && len(p) > len(prefix) && p[:len(prefix)] == prefix && p[len(prefix)] == '/') {
		return "page"
	}
	return "false"
}

// localClock formats t's clock time in the site zone, e.g. "16:00".
func localClock(ctx context.Context, t time.Time) string {
	return t.In(ViewOf(ctx).Location).Format("15:04")
}

// localEnd is a window's end beside its start: the clock alone on the
// same day, dated when the window crosses midnight ("12-01 22:00 –
// 2026-12-02 02:00", never "22:00 – 02:00").
func localEnd(ctx context.Context, start, end time.Time) string {
	loc := ViewOf(ctx).Location
	if start.In(loc).Format("2006-01-02") == end.In(loc).Format("2006-01-02") {
		return localClock(ctx, end)
	}
	return LocalTime(ctx, end)
}

// weekdayName is the English name of t's weekday (a translation key).
func weekdayName(t time.Time) string {
	return [...]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}[t.Weekday()]
}

// kindLabel names an instance kind in the reader's language.
func kindLabel(ctx context.Context, kind gpuportal.InstanceKind) string {
	switch kind {
	case gpuportal.KindSpot:
		return T(ctx, "Spot")
	case gpuportal.KindOnDemand:
		return T(ctx, "On-demand")
	case gpuportal.KindReserved:
		return T(ctx, "Reserved")
	}
	return string(kind)
}

// ReasonLabel names an interruption reason in the reader's language.
func ReasonLabel(ctx context.Context, reason gpuportal.InterruptReason) string {
	return T(ctx, gpuportal.InterruptionReasonText(reason))
}

// weekdayLabel names a policy's weekday key ("mon") in the reader's
// language.
func weekdayLabel(ctx context.Context, key string) string {
	names := map[string]string{"mon": "Mon", "tue": "Tue", "wed": "Wed", "thu": "Thu", "fri": "Fri", "sat": "Sat", "sun": "Sun"}
	if n, ok := names[key]; ok {
		return T(ctx, n)
	}
	return key
}

// TopUpURL is the ledger's top-up form filled with what a shortfall
// needs (whole yuan, at least the smallest top-up); once paid, the payer
// goes back to back, a path on this site.
func TopUpURL(missing gpuportal.Fen, back string) string {
	q := url.Values{"amount": {gpuportal.TopUpFor(missing).Decimal()}, "next": {back}}
	return "/ledger?" + q.Encode() + "#topup"
}

// quoteURL is the calendar showing this quote again: model, region,
// count and hours, on the week of its start.
func quoteURL(q QuotePanel) string {
	v := url.Values{"model": {q.Model}, "region": {q.Region}, "count": {strconv.Itoa(q.Count)}, "start": {q.Start}, "end": {q.End}}
	if len(q.Start) >= len("2006-01-02") {
		v.Set("week", q.Start[:len("2006-01-02")])
	}
	return "/calendar?" + v.Encode()
}

// hoursText says a span of hours as people do: "45 min", "7.5 h", "2 d 6 h".
func hoursText(ctx context.Context, h float64) string {
	switch {
	case h < 1:
		return T(ctx, "%d min", int(math.Ceil(h*60)))
	case h < 48:
		return T(ctx, "%s h", strconv.FormatFloat(math.Round(h*10)/10, 'f', -1, 64))
	}
	days := int(h) / 24
	return T(ctx, "%d d %d h", days, int(math.Round(h))-days*24)
}

// LocalDate is t's day in the site zone, e.g. "2026-12-02".
func LocalDate(ctx context.Context, t time.Time) string {
	return t.In(ViewOf(ctx).Location).Format("2006-01-02")
}

// eventDescription says what a webhook event type is about (English; the
// page translates it).
func eventDescription(typ string) string {
	switch typ {
	case gpuportal.EventInstanceRunning:
		return "an instance started running"
	case gpuportal.EventInstanceRebalance:
		return "a spot instance will likely be interrupted soon"
	case gpuportal.EventInstanceNotice:
		return "a spot instance got its interruption notice"
	case gpuportal.EventInstanceInterrupted:
		return "an instance was interrupted"
	case gpuportal.EventInstanceStopped:
		return "an instance stopped"
	case gpuportal.EventInstanceFailed:
		return "an instance failed"
	case gpuportal.EventReservationConfirm:
		return "a booking was confirmed"
	case gpuportal.EventReservationStarted:
		return "a reservation started"
	case gpuportal.EventReservationEnding:
		return "a reservation ends soon"
	case gpuportal.EventReservationEnded:
		return "a reservation ended"
	case gpuportal.EventReservationCancel:
		return "a reservation was cancelled"
	case gpuportal.EventWaitlistOffered:
		return "a waitlist slot is offered"
	case gpuportal.EventJobFinished:
		return "a job finished"
	case gpuportal.EventBalanceLow:
		return "the balance runs low"
	case gpuportal.EventTopUpCredited:
		return "a top-up was credited"
	}
	return typ
}

// withLabelQuery carries a label filter into a link of its list.
func withLabelQuery(link string, f gpuportal.LabelFilter) string {
	for _, s := range f.Strings() {
		link += "&label=" + url.QueryEscape(s)
	}
	return link
}
