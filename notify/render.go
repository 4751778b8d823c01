package notify

import (
	"bytes"
	"cmp"
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"

	"gpuportal"
	"gpuportal/i18n"
)

// Message is a rendered notification.
type Message struct {
	Subject string
	// Body is the message's words without its link (the in-app list links
	// the page itself); Text is the email's plain text, the link last.
	Body        string
	Text        string
	HTML        string
	SMS         string // one short SMS
	Attachments []Attachment
}

// Attachment is a file sent with an email.
type Attachment struct {
	Name        string
	ContentType string
	Data        []byte
}

// Render writes a notification in a language. baseURL makes links absolute.
func Render(n gpuportal.Notification, lang, baseURL string, loc *time.Location) Message {
	p := n.Params
	T := func(key string, args ...any) string { return i18n.T(lang, key, args...) }
	r := &rendering{p: p, T: T, zone: loc.String(), loc: loc, link: strings.TrimRight(baseURL, "/"),
		when: func(tm time.Time) string { return tm.In(loc).Format("2006-01-02 15:04") },
		what: fmt.Sprintf("%d × %s", p.Count, cmp.Or(p.ModelName, p.Model)), where: p.Region}
	if p.RegionName != "" {
		r.where = T(p.RegionName)
	}
	if write, ok := renderers[n.Kind]; ok {
		write(r)
	} else {
		r.m.Subject = n.Kind
		r.lines = []string{n.Kind}
		r.m.SMS = "gpuportal: " + n.Kind
	}
	m, link, lines := r.m, r.link, r.lines
	m.Body = strings.Join(lines, "\n")
	m.Text = m.Body + "\n\n" + link + "\n"
	var buf bytes.Buffer
	_ = emailHTML.Execute(&buf, struct {
		Subject, Link, Open string
		Lines               []string
	}{m.Subject, link, T("Open in gpuportal"), lines})
	m.HTML = buf.String()
	return m
}

var emailHTML = template.Must(template.New("email").Parse(`<!DOCTYPE html>
<html><body style="font-family: sans-serif; line-height: 1.5">
<h2>{{.Subject}}</h2>
{{range .Lines}}<p>{{.}}</p>
{{end}}<p><a href="{{.Link}}">{{.Open}}</a></p>
</body></html>`))

// stepWords says in words what a failed scheduler step was to do (the
// steps are gpuportal.Step*).
func stepWords(T func(string, ...any) string, step string) string {
	switch step {
	case gpuportal.StepComplete:
		return T("end your reservation")
	case gpuportal.StepActivate:
		return T("start your reservation")
	case gpuportal.StepLaunch:
		return T("launch the work of your reservation")
	case gpuportal.StepLostWork:
		return T("end your instance on a failed node")
	case gpuportal.StepReplace:
		return T("replace your reservation's failed GPUs")
	case gpuportal.StepBalance:
		return T("act on your balance")
	case gpuportal.StepInterrupt:
		return T("give your spot instance its notice")
	case gpuportal.StepRebalance:
		return T("recommend your spot instance checkpoint")
	case gpuportal.StepPlace:
		return T("start your instance")
	case gpuportal.StepTask:
		return T("start your job's task")
	case gpuportal.StepWaitlist:
		return T("act on your waitlist entry")
	case gpuportal.StepReminder:
		return T("remind you of your reservation")
	}
	return T("carry out a scheduled step")
}

// rendering is one notification being written: what every kind's writer
// reads (the facts, the language's T, times in the site's zone) and what
// it fills in (the message, its lines, the link: the portal's address, to
// which it adds its page).
type rendering struct {
	p     gpuportal.NoteParams
	T     func(string, ...any) string
	when  func(time.Time) string
	zone  string
	what  string // "2 × NVIDIA A100 80GB"
	where string // the region by name: "Chengdu 1", "成都一区"
	loc   *time.Location
	m     Message
	lines []string
	link  string
}

// renderers writes each kind of notification, one function a kind.
var renderers = map[string]func(*rendering){
	gpuportal.NoteBookingConfirmed:        renderBookingConfirmed,
	gpuportal.NoteBookingCancelled:        renderBookingCancelled,
	gpuportal.NoteWaitlistOffer:           renderWaitlistOffer,
	gpuportal.NoteWaitlistExpired:         renderWaitlistExpired,
	gpuportal.NoteWaitlistBooked:          renderWaitlistBooked,
	gpuportal.NoteReservationStarts:       renderReservationStarts,
	gpuportal.NoteReservationEnds:         renderReservationEnds,
	gpuportal.NoteSpotInterruption:        renderSpotInterruption,
	gpuportal.NoteVolumesSuspended:        renderVolumesSuspended,
	gpuportal.NoteVolumeDeleteSoon:        renderVolumeDeleteSoon,
	gpuportal.NoteVolumeDeleted:           renderVolumeDeleted,
	gpuportal.NoteDiskSuspended:           renderDiskSuspended,
	gpuportal.NoteDiskReleaseSoon:         renderDiskReleaseSoon,
	gpuportal.NoteDiskReleased:            renderDiskReleased,
	gpuportal.NoteIdleStopped:             renderIdleStopped,
	gpuportal.NoteReservationLaunched:     renderReservationLaunched,
	gpuportal.NoteReservationLaunchFailed: renderReservationLaunchFailed,
	gpuportal.NoteScheduleFailed:          renderScheduleFailed,
	gpuportal.NoteSpotRebalance:           renderSpotRebalance,
	gpuportal.NoteInstanceRestarted:       renderInstanceRestarted,
	gpuportal.NoteReservationShorted:      renderReservationShorted,
	gpuportal.NoteJobSucceeded:            renderJobSucceeded,
	gpuportal.NoteJobUnpaid:               renderJobUnpaid,
	gpuportal.NoteJobFailed:               renderJobFailed,
	gpuportal.NoteAutoBookUnpaid:          renderAutoBookUnpaid,
	gpuportal.NoteBudgetReached:           renderBudgetReached,
	gpuportal.NoteMemberLimit:             renderMemberLimit,
	gpuportal.NoteWebhookFailing:          renderWebhookFailing,
	gpuportal.NoteGPUFailure:              renderGPUFailure,
	gpuportal.NoteMaintenance:             renderMaintenance,
	gpuportal.NoteBalanceLow:              renderBalanceLow,
	gpuportal.NoteBalanceStop:             renderBalanceStop,
	gpuportal.NoteTokensRevoked:           renderTokensRevoked,
	gpuportal.NoteVerifyEmail:             renderVerifyEmail,
	gpuportal.NoteVerifyPhone:             renderVerifyPhone,
	gpuportal.NotePasswordReset:           renderPasswordReset,
}

func renderBookingConfirmed(r *rendering) {
	r.link += fmt.Sprintf("/reservations/%d", r.p.ReservationID)
	r.m.Subject = r.T("Booking confirmed: reservation #%d", r.p.ReservationID)
	r.lines = []string{r.T("Your reservation #%d is confirmed: %s in %s, %s to %s (%s).", r.p.ReservationID, r.what, r.where, r.when(r.p.Start), r.when(r.p.End), r.zone), r.T("Price: %s.", r.p.Price.String())}
	r.m.SMS = r.T("gpuportal: reservation #%d confirmed, %s from %s.", r.p.ReservationID, r.what, r.when(r.p.Start))
}

func renderBookingCancelled(r *rendering) {
	r.link += fmt.Sprintf("/reservations/%d", r.p.ReservationID)
	r.m.Subject = r.T("Reservation #%d cancelled", r.p.ReservationID)
	r.lines = []string{r.T("Reservation #%d (%s, %s to %s) is cancelled.", r.p.ReservationID, r.what, r.when(r.p.Start), r.when(r.p.End)), r.T("Fee: %s, refund: %s.", r.p.Fee.String(), r.p.Refund.String())}
	r.m.SMS = r.T("gpuportal: reservation #%d cancelled, fee %s, refund %s.", r.p.ReservationID, r.p.Fee.String(), r.p.Refund.String())
}

func renderWaitlistOffer(r *rendering) {
	r.link += "/waitlist"
	r.m.Subject = r.T("GPUs are free for your waitlist request")
	r.lines = []string{r.T("%s in %s from %s to %s (%s) is held for you until %s.", r.what, r.where, r.when(r.p.Start), r.when(r.p.End), r.zone, r.when(r.p.Expires)),
		r.T("Claim it before then; the price is the quote at the moment you claim.")}
	r.m.SMS = r.T("gpuportal: %s from %s is held for you until %s. Claim: %s", r.what, r.when(r.p.Start), r.when(r.p.Expires), r.link)
}

func renderWaitlistExpired(r *rendering) {
	r.link += "/waitlist"
	r.m.Subject = r.T("Your waitlist request for %s has expired", r.what)
	r.lines = []string{r.T("The waitlist request for %s from %s to %s has expired.", r.what, r.when(r.p.Start), r.when(r.p.End))}
	r.m.SMS = r.T("gpuportal: the waitlist request for %s from %s has expired.", r.what, r.when(r.p.Start))
}

func renderWaitlistBooked(r *rendering) {
	r.link += fmt.Sprintf("/reservations/%d", r.p.ReservationID)
	r.m.Subject = r.T("Booked from the waitlist: reservation #%d", r.p.ReservationID)
	r.lines = []string{r.T("Capacity freed and your waitlist request was booked: reservation #%d, %s, %s to %s (%s).", r.p.ReservationID, r.what, r.when(r.p.Start), r.when(r.p.End), r.zone), r.T("Price: %s.", r.p.Price.String())}
	r.m.SMS = r.T("gpuportal: waitlist booked, reservation #%d, %s from %s.", r.p.ReservationID, r.what, r.when(r.p.Start))
}

func renderReservationStarts(r *rendering) {
	r.link += fmt.Sprintf("/reservations/%d", r.p.ReservationID)
	r.m.Subject = r.T("Reservation #%d starts in 1 hour", r.p.ReservationID)
	r.lines = []string{r.T("Reservation #%d (%s) starts at %s (%s).", r.p.ReservationID, r.what, r.when(r.p.Start), r.zone)}
	if r.p.InstanceID > 0 {
		r.lines = append(r.lines, r.T("Instance #%d starts again on its GPUs then, with its kept disk.", r.p.InstanceID))
	}
	r.m.SMS = r.T("gpuportal: reservation #%d starts at %s.", r.p.ReservationID, r.when(r.p.Start))
}

func renderReservationEnds(r *rendering) {
	r.link += fmt.Sprintf("/reservations/%d", r.p.ReservationID)
	r.m.Subject = r.T("Reservation #%d ends in 40 minutes", r.p.ReservationID)
	r.lines = []string{r.T("Reservation #%d (%s) ends at %s (%s): save your work; its instances stop then.", r.p.ReservationID, r.what, r.when(r.p.End), r.zone)}
	r.m.SMS = r.T("gpuportal: reservation #%d ends at %s, save your work.", r.p.ReservationID, r.when(r.p.End))
	if r.p.ExtendHours > 0 {
		r.link += "#extend"
		r.lines = append(r.lines, r.T("You can extend it by up to %d hours now, keeping its GPUs and instances: open it and choose Extend.", r.p.ExtendHours))
		r.m.SMS = r.T("gpuportal: reservation #%d ends at %s; it can be extended by up to %d h now.", r.p.ReservationID, r.when(r.p.End), r.p.ExtendHours)
	}
}

func renderSpotInterruption(r *rendering) {
	r.link += "/instances"
	at := r.p.Deadline.In(r.loc).Format("2006-01-02 15:04:05")
	if r.p.Kind != "" && r.p.Kind != string(gpuportal.KindSpot) {
		// An on-demand instance stopped because the balance ran out
		// is no spot interruption.
		r.m.Subject = r.T("Instance #%d will be stopped at %s", r.p.InstanceID, at)
		r.lines = []string{r.T("Instance #%d (%s) is stopped at %s (%s): %s.", r.p.InstanceID, r.what, at, r.zone, r.T(gpuportal.InterruptionReasonText(gpuportal.InterruptReason(r.p.Reason)))),
			r.T("Save your work now; its metadata endpoint shows the same time.")}
		r.m.SMS = r.T("gpuportal: instance #%d is stopped at %s. Save your work.", r.p.InstanceID, r.p.Deadline.In(r.loc).Format("15:04:05"))
		return
	}
	r.m.Subject = r.T("Spot instance #%d will be interrupted at %s", r.p.InstanceID, at)
	r.lines = []string{r.T("Instance #%d (%s) gets SIGTERM at %s (%s), reason: %s.", r.p.InstanceID, r.what, at, r.zone, r.T(gpuportal.InterruptionReasonText(gpuportal.InterruptReason(r.p.Reason)))),
		r.T("Save a checkpoint now; its metadata endpoint shows the same deadline.")}
	r.m.SMS = r.T("gpuportal: spot instance #%d gets SIGTERM at %s. Checkpoint now.", r.p.InstanceID, r.p.Deadline.In(r.loc).Format("15:04:05"))
}

func renderVolumesSuspended(r *rendering) {
	r.link += "/volumes"
	r.m.Subject = r.T("Your balance ran out: volumes kept until %s", r.when(r.p.Deadline))
	r.lines = []string{r.T("Your balance reached zero, so volumes %s are suspended: they are kept, unbilled, until %s (%s) and then deleted with their files.", r.p.VolumeNames, r.when(r.p.Deadline), r.zone),
		r.T("Top up before then to keep them; they are billed again from the hour you do.")}
	r.m.SMS = r.T("gpuportal: balance empty; volumes %s will be deleted on %s unless you top up.", r.p.VolumeNames, r.when(r.p.Deadline))
}

func renderVolumeDeleteSoon(r *rendering) {
	r.link += "/volumes"
	r.m.Subject = r.T("Volume %s will be deleted on %s", r.p.VolumeNames, r.when(r.p.Deadline))
	r.lines = []string{r.T("Volume %s has been suspended since your balance ran out and will be deleted with its files on %s (%s). Top up to keep it.", r.p.VolumeNames, r.when(r.p.Deadline), r.zone)}
	r.m.SMS = r.T("gpuportal: volume %s will be deleted on %s unless you top up.", r.p.VolumeNames, r.when(r.p.Deadline))
}

func renderVolumeDeleted(r *rendering) {
	r.link += "/volumes"
	r.m.Subject = r.T("Volume %s was deleted", r.p.VolumeNames)
	r.lines = []string{r.T("Volume %s was deleted with its files after 15 days with no balance to pay for it.", r.p.VolumeNames)}
	r.m.SMS = r.T("gpuportal: volume %s was deleted after 15 days unpaid.", r.p.VolumeNames)
}

func renderDiskSuspended(r *rendering) {
	r.link += fmt.Sprintf("/instances/%d", r.p.InstanceID)
	r.m.Subject = r.T("Your balance ran out: the disk of instance #%d is kept until %s", r.p.InstanceID, r.when(r.p.Deadline))
	r.lines = []string{r.T("Your balance reached zero, so the kept disk of instance #%d is suspended: it is kept, unbilled, until %s (%s) and then released with what it holds.", r.p.InstanceID, r.when(r.p.Deadline), r.zone),
		r.T("Top up what it owes before then to keep it.")}
	r.m.SMS = r.T("gpuportal: balance empty; the disk of instance #%d will be released on %s unless you top up.", r.p.InstanceID, r.when(r.p.Deadline))
}

func renderDiskReleaseSoon(r *rendering) {
	r.link += fmt.Sprintf("/instances/%d", r.p.InstanceID)
	r.m.Subject = r.T("The disk of instance #%d will be released on %s", r.p.InstanceID, r.when(r.p.Deadline))
	r.lines = []string{r.T("The kept disk of instance #%d has been suspended since your balance ran out and will be released with what it holds on %s (%s). Top up to keep it.", r.p.InstanceID, r.when(r.p.Deadline), r.zone)}
	r.m.SMS = r.T("gpuportal: the disk of instance #%d will be released on %s unless you top up.", r.p.InstanceID, r.when(r.p.Deadline))
}

func renderDiskReleased(r *rendering) {
	r.link += fmt.Sprintf("/instances/%d", r.p.InstanceID)
	r.m.Subject = r.T("The disk of instance #%d was released", r.p.InstanceID)
	r.lines = []string{r.T("The kept disk of instance #%d was released with what it held after 15 days with no balance to pay for it.", r.p.InstanceID)}
	r.m.SMS = r.T("gpuportal: the disk of instance #%d was released after 15 days unpaid.", r.p.InstanceID)
}

func renderIdleStopped(r *rendering) {
	r.link += "/instances"
	r.m.Subject = r.T("Instance #%d was stopped: its GPUs were idle", r.p.InstanceID)
	r.lines = []string{r.T("Instance #%d (%s) was stopped after %d minutes with all its GPUs at 0 %% utilisation, as its launch asked (idle stop), so it no longer draws on your balance.", r.p.InstanceID, r.what, r.p.Missing)}
	r.m.SMS = r.T("gpuportal: instance #%d stopped after %d idle minutes.", r.p.InstanceID, r.p.Missing)
}

func renderReservationLaunched(r *rendering) {
	r.link += fmt.Sprintf("/reservations/%d", r.p.ReservationID)
	r.m.Subject = r.T("Reservation #%d has started and its work is launching", r.p.ReservationID)
	r.lines = []string{r.T("Reservation #%d (%s) started at %s (%s): what you asked to run is starting on its GPUs, until %s.", r.p.ReservationID, r.what, r.when(r.p.Start), r.zone, r.when(r.p.End))}
	r.m.SMS = r.T("gpuportal: reservation #%d started; your work is launching on its GPUs.", r.p.ReservationID)
}

func renderReservationLaunchFailed(r *rendering) {
	r.link += fmt.Sprintf("/reservations/%d", r.p.ReservationID)
	r.m.Subject = r.T("Reservation #%d started, but its launch could not run", r.p.ReservationID)
	r.lines = []string{r.T("Reservation #%d (%s) started at %s (%s) and its GPUs are yours until %s, but what you asked to run on them could not start: %s", r.p.ReservationID, r.what, r.when(r.p.Start), r.zone, r.when(r.p.End), r.T(r.p.Reason)),
		r.T("Launch your work from the reservation's page.")}
	r.m.SMS = r.T("gpuportal: reservation #%d started, but its launch could not run; launch it from the reservation's page.", r.p.ReservationID)
}

func renderScheduleFailed(r *rendering) {
	switch {
	case r.p.ReservationID != 0:
		r.link += fmt.Sprintf("/reservations/%d", r.p.ReservationID)
	case r.p.InstanceID != 0:
		r.link += fmt.Sprintf("/instances/%d", r.p.InstanceID)
	case r.p.JobID != 0:
		r.link += fmt.Sprintf("/jobs/%d", r.p.JobID)
	}
	r.m.Subject = r.T("Something due for you could not be done: %s", stepWords(r.T, r.p.Kind))
	r.lines = []string{r.T("The platform could not %s (%s): %s", stepWords(r.T, r.p.Kind), r.p.Subject, r.T(r.p.Reason)),
		r.T("Everything else went on as usual. The operators see this failure too, and it is tried again at the next chance.")}
	r.m.SMS = r.T("gpuportal: something due for you could not be done (%s); see the portal.", stepWords(r.T, r.p.Kind))
}

func renderSpotRebalance(r *rendering) {
	r.link += "/instances"
	if r.p.Deadline.IsZero() {
		r.m.Subject = r.T("Spot instance #%d: checkpoint soon", r.p.InstanceID)
		r.lines = []string{r.T("Booked demand will want the GPUs of instance #%d (%s) within about half an hour: save a checkpoint now and report it; its metadata endpoint shows the rebalance recommendation.", r.p.InstanceID, r.what)}
	} else {
		// Title and body give the same time: when the GPUs are wanted.
		at := r.p.Deadline.In(r.loc).Format("15:04")
		r.m.Subject = r.T("Spot instance #%d: checkpoint before %s", r.p.InstanceID, at)
		r.lines = []string{r.T("Booked demand will want the GPUs of instance #%d (%s) at about %s (%s): save a checkpoint now and report it; its metadata endpoint shows the rebalance recommendation.", r.p.InstanceID, r.what, at, r.zone)}
	}
	r.lines = append(r.lines, r.T("The interruption notice still comes before the GPUs are needed."))
	r.m.SMS = r.T("gpuportal: spot instance #%d may be interrupted soon; checkpoint now.", r.p.InstanceID)
}

func renderInstanceRestarted(r *rendering) {
	r.link += "/instances"
	r.m.Subject = r.T("Spot instance #%d restarted", r.p.InstanceID)
	r.lines = []string{r.T("Instance #%d (%s) was restarted automatically after an interruption; it finds its checkpoint directory again.", r.p.InstanceID, r.what)}
	r.m.SMS = r.T("gpuportal: spot instance #%d restarted.", r.p.InstanceID)
}

func renderReservationShorted(r *rendering) {
	r.link += fmt.Sprintf("/reservations/%d", r.p.ReservationID)
	r.m.Subject = r.T("Reservation #%d lost %d GPUs", r.p.ReservationID, r.p.Missing)
	if r.p.Reason == "" || r.p.Reason == gpuportal.ShortNodeFailure {
		r.lines = []string{r.T("A node failure took %d GPUs of reservation #%d and no replacement was free; %s is refunded for the hours left.", r.p.Missing, r.p.ReservationID, r.p.Refund.String())}
		r.m.SMS = r.T("gpuportal: reservation #%d lost %d GPUs to a node failure; %s refunded.", r.p.ReservationID, r.p.Missing, r.p.Refund.String())
		return
	}
	r.lines = []string{r.T("%d GPUs of reservation #%d could not be provided (%s); %s is refunded for the hours left.", r.p.Missing, r.p.ReservationID, r.T(gpuportal.ShortfallCauseText(r.p.Reason)), r.p.Refund.String())}
	r.m.SMS = r.T("gpuportal: reservation #%d is short of %d GPUs; %s refunded.", r.p.ReservationID, r.p.Missing, r.p.Refund.String())
}

func renderJobSucceeded(r *rendering) {
	r.link += fmt.Sprintf("/jobs/%d", r.p.JobID)
	r.m.Subject = r.T("Job %s succeeded", r.p.JobName)
	r.lines = []string{r.T("Job %s (#%d): all %d tasks succeeded.", r.p.JobName, r.p.JobID, r.p.Count)}
	r.m.SMS = r.T("gpuportal: job #%d succeeded (%d tasks).", r.p.JobID, r.p.Count)
}

func renderJobUnpaid(r *rendering) {
	r.link += "/ledger"
	r.m.Subject = r.T("Job %s is waiting for money", r.p.JobName)
	r.lines = []string{r.T("Job %s (#%d) starts no more tasks: your balance cannot pay for another. Top up and it carries on.", r.p.JobName, r.p.JobID)}
	r.m.SMS = r.T("gpuportal: job #%d waits for a top-up.", r.p.JobID)
}

func renderJobFailed(r *rendering) {
	r.link += fmt.Sprintf("/jobs/%d", r.p.JobID)
	failed := make([]string, len(r.p.Tasks))
	for k, t := range r.p.Tasks {
		failed[k] = strconv.Itoa(t)
	}
	r.m.Subject = r.T("Job %s failed", r.p.JobName)
	r.lines = []string{r.T("Job %s (#%d) ended: %d of its %d tasks failed after every attempt.", r.p.JobName, r.p.JobID, len(r.p.Tasks), r.p.Count),
		r.T("Failed tasks: %s.", strings.Join(failed, ", "))}
	r.m.SMS = r.T("gpuportal: job #%d failed, %d of %d tasks failed.", r.p.JobID, len(r.p.Tasks), r.p.Count)
}

func renderAutoBookUnpaid(r *rendering) {
	r.link += "/ledger"
	r.m.Subject = r.T("GPUs freed for your waitlist request, but your balance cannot pay")
	r.lines = []string{r.T("%s in %s from %s to %s (%s) could be booked for you, but what is available in your balance does not pay for it.", r.what, r.where, r.when(r.p.Start), r.when(r.p.End), r.zone),
		r.T("Top up and it is booked at the next chance, if the GPUs are still free.")}
	r.m.SMS = r.T("gpuportal: your waitlist request for %s from %s could be booked; top up to book it.", r.what, r.when(r.p.Start))
}

func renderBudgetReached(r *rendering) {
	r.link += "/ledger"
	b := gpuportal.Budget{}
	if r.p.Budget != nil {
		b = *r.p.Budget
	}
	r.m.Subject = r.T("You have spent %d %% of your monthly budget", b.Percent)
	r.lines = []string{r.T("This month you have spent %s of your %s budget (%d %%).", b.Spent.String(), b.Monthly.String(), b.Percent),
		r.T("Nothing is stopped by a budget: it only tells you. Change it on the ledger page.")}
	r.m.SMS = r.T("gpuportal: %d %% of your monthly budget spent (%s of %s).", b.Percent, b.Spent.String(), b.Monthly.String())
}

func renderMemberLimit(r *rendering) {
	r.link += "/teams"
	b := gpuportal.Budget{}
	if r.p.Budget != nil {
		b = *r.p.Budget
	}
	r.m.Subject = r.T("%s has spent %d %% of their monthly limit in team %s", r.p.Member, b.Percent, r.p.Team)
	r.lines = []string{r.T("This month %s has spent %s of the %s the team %s allows them (%d %%).", r.p.Member, b.Spent.String(), b.Monthly.String(), r.p.Team, b.Percent),
		r.T("Past the limit, what they launch or book for the team is refused; the team's owners and admins change limits on the team's page.")}
	r.m.SMS = r.T("gpuportal: %s has spent %d %% of their monthly limit in team %s.", r.p.Member, b.Percent, r.p.Team)
}

func renderGPUFailure(r *rendering) {
	r.link += fmt.Sprintf("/instances/%d", r.p.InstanceID)
	r.m.Subject = r.T("The GPU of instance #%d failed", r.p.InstanceID)
	r.lines = []string{r.T("A GPU of instance #%d (%s) failed under it: %s. It was taken out of service at once.", r.p.InstanceID, r.what, r.p.Reason)}
	if r.p.Subject == string(gpuportal.InstanceInterrupted) {
		r.lines = append(r.lines, r.T("The instance was interrupted; if it restarts by itself, it starts again on healthy GPUs from its last checkpoint."))
	} else {
		r.lines = append(r.lines, r.T("The instance was ended; launch it again when you are ready."))
	}
	if r.p.Refund > 0 {
		r.lines = append(r.lines, r.T("The hour in progress, %s, was credited back to your balance.", r.p.Refund.String()))
	}
	r.m.SMS = r.T("gpuportal: the GPU of instance #%d failed (%s).", r.p.InstanceID, r.p.Reason)
}

func renderMaintenance(r *rendering) {
	window := r.T("%s to %s (%s)", r.when(r.p.Start), r.when(r.p.End), r.zone)
	if r.p.ReservationID != 0 {
		r.link += fmt.Sprintf("/calendar?model=%s&region=%s&count=%d&hours=%d", r.p.Model, r.p.Region, r.p.Count, r.p.ExtendHours)
		r.m.Subject = r.T("Reservation #%d is cancelled for maintenance, refunded in full", r.p.ReservationID)
		r.lines = []string{
			r.T("Maintenance of the GPUs your reservation #%d (%s) needs, %s, leaves no room for it: %s.", r.p.ReservationID, r.what, window, r.p.Subject),
			r.T("It is cancelled and its whole price, %s, is back in your balance.", r.p.Refund.String()),
			r.T("The calendar shows the nearest windows of the same size to book instead."),
		}
		r.m.SMS = r.T("gpuportal: reservation #%d is cancelled for maintenance and refunded in full (%s).", r.p.ReservationID, r.p.Refund.String())
		return
	}
	r.link += fmt.Sprintf("/instances/%d", r.p.InstanceID)
	r.m.Subject = r.T("Maintenance of the node instance #%d runs on: %s", r.p.InstanceID, window)
	r.lines = []string{r.T("The node instance #%d (%s) runs on goes into maintenance %s: %s.", r.p.InstanceID, r.what, window, r.p.Subject)}
	if r.p.Kind == string(gpuportal.KindSpot) {
		r.lines = append(r.lines, r.T("As a spot instance it gets its interruption notice before the start; checkpoint then."))
	} else {
		r.lines = append(r.lines, r.T("It is stopped at the start; save what you need before then, and launch again on another node."))
	}
	r.m.SMS = r.T("gpuportal: instance #%d's node goes into maintenance at %s.", r.p.InstanceID, r.when(r.p.Start))
}

func renderWebhookFailing(r *rendering) {
	r.link += "/webhooks"
	r.m.Subject = r.T("Your webhook %s is failing", r.p.Subject)
	r.lines = []string{r.T("The last %d deliveries to %s failed; the last answer: %s.", gpuportal.WebhookFailingAfter, r.p.Subject, r.p.Reason),
		r.T("Its events wait and are retried, further apart each time, for 24 hours; the webhooks page lists them and sends them again.")}
	r.m.SMS = r.T("gpuportal: your webhook %s is failing.", r.p.Subject)
}

func renderBalanceLow(r *rendering) {
	r.link += "/ledger"
	r.m.Subject = r.T("Your balance runs out at %s", r.when(r.p.RunsOutAt))
	r.lines = []string{r.T("At what your instances cost now, the %s available runs out at %s (%s).", r.p.Available.String(), r.when(r.p.RunsOutAt), r.zone),
		r.T("Top up, or your spot and on-demand instances get the stop notice then; reservations are paid and are not touched.")}
	r.m.SMS = r.T("gpuportal: your balance runs out at %s; top up to keep your instances.", r.when(r.p.RunsOutAt))
}

func renderBalanceStop(r *rendering) {
	r.link += "/ledger"
	r.m.Subject = r.T("Your balance ran out: %d instances are being stopped", r.p.Count)
	r.lines = []string{r.T("Your balance ran out (available: %s), so %d of your spot and on-demand instances got the stop notice.", r.p.Available.String(), r.p.Count),
		r.T("Reservations are paid and are not touched. Top up before the notice ends to keep them.")}
	r.m.SMS = r.T("gpuportal: balance ran out, %d instances get the stop notice. Top up to keep them.", r.p.Count)
}

func renderTokensRevoked(r *rendering) {
	r.link += "/settings#tokens"
	r.m.Subject = r.T("Your API tokens were revoked")
	because := r.T("your password was reset")
	if r.p.Reason == "password_change" {
		because = r.T("you changed your password and asked for it")
	}
	r.lines = []string{r.T("All %d API tokens of your account were revoked because %s. Scripts that used them need a new token.", r.p.Count, because),
		r.T("If you did not do this, reset your password now and contact support.")}
	r.m.SMS = r.T("gpuportal: your %d API tokens were revoked. If it was not you, reset your password.", r.p.Count)
}

func renderVerifyEmail(r *rendering) {
	r.link += "/verify-email/" + r.p.Token
	r.m.Subject = r.T("Verify your email address for gpuportal")
	r.lines = []string{r.T("Open the link below to confirm that this address is yours; until then gpuportal sends nothing else to it. The link works once, until %s (%s).", r.when(r.p.Expires), r.zone),
		r.T("If you did not sign up, ignore this email: nothing more will come.")}
	r.m.SMS = r.T("gpuportal: verify your email with the link we sent there.")
}

func renderVerifyPhone(r *rendering) {
	r.link += "/settings#profile"
	r.m.Subject = r.T("Your gpuportal verification code")
	r.lines = []string{r.T("Your gpuportal code is %s. It works for 10 minutes.", r.p.Code)}
	r.m.SMS = r.T("gpuportal code: %s (valid 10 minutes). If you did not ask for it, ignore this message.", r.p.Code)
}

func renderPasswordReset(r *rendering) {
	r.link += "/password-reset/" + r.p.Token
	r.m.Subject = r.T("Reset your gpuportal password")
	r.lines = []string{r.T("Someone (hopefully you) asked to reset the password of this account. The link below works once, until %s (%s).", r.when(r.p.Expires), r.zone),
		r.T("If it was not you, ignore this email: your password stays as it is.")}
	r.m.SMS = r.T("gpuportal: a password reset was requested; the link is in your email.")
}
