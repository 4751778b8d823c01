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
	when := func(tm time.Time) string { return tm.In(loc).Format("2006-01-02 15:04") }
	zone := loc.String()
	what := fmt.Sprintf("%d × %s", p.Count, cmp.Or(p.ModelName, p.Model))
	link := strings.TrimRight(baseURL, "/")
	var m Message
	var lines []string
	switch n.Kind {
	case gpuportal.NoteBookingConfirmed:
		link += fmt.Sprintf("/reservations/%d", p.ReservationID)
		m.Subject = T("Booking confirmed: reservation #%d", p.ReservationID)
		lines = []string{T("Your reservation #%d is confirmed: %s in %s, %s to %s (%s).", p.ReservationID, what, p.Region, when(p.Start), when(p.End), zone), T("Price: %s.", p.Price.String())}
		m.SMS = T("gpuportal: reservation #%d confirmed, %s from %s.", p.ReservationID, what, when(p.Start))
	case gpuportal.NoteBookingCancelled:
		link += fmt.Sprintf("/reservations/%d", p.ReservationID)
		m.Subject = T("Reservation #%d cancelled", p.ReservationID)
		lines = []string{T("Reservation #%d (%s, %s to %s) is cancelled.", p.ReservationID, what, when(p.Start), when(p.End)), T("Fee: %s, refund: %s.", p.Fee.String(), p.Refund.String())}
		m.SMS = T("gpuportal: reservation #%d cancelled, fee %s, refund %s.", p.ReservationID, p.Fee.String(), p.Refund.String())
	case gpuportal.NoteWaitlistOffer:
		link += "/waitlist"
		m.Subject = T("GPUs are free for your waitlist request")
		lines = []string{T("%s in %s from %s to %s (%s) is held for you until %s.", what, p.Region, when(p.Start), when(p.End), zone, when(p.Expires)),
			T("Claim it before then; the price is the quote at the moment you claim.")}
		m.SMS = T("gpuportal: %s from %s is held for you until %s. Claim: %s", what, when(p.Start), when(p.Expires), link)
	case gpuportal.NoteWaitlistExpired:
		link += "/waitlist"
		m.Subject = T("Your waitlist request for %s has expired", what)
		lines = []string{T("The waitlist request for %s from %s to %s has expired.", what, when(p.Start), when(p.End))}
		m.SMS = T("gpuportal: the waitlist request for %s from %s has expired.", what, when(p.Start))
	case gpuportal.NoteWaitlistBooked:
		link += fmt.Sprintf("/reservations/%d", p.ReservationID)
		m.Subject = T("Booked from the waitlist: reservation #%d", p.ReservationID)
		lines = []string{T("Capacity freed and your waitlist request was booked: reservation #%d, %s, %s to %s (%s).", p.ReservationID, what, when(p.Start), when(p.End), zone), T("Price: %s.", p.Price.String())}
		m.SMS = T("gpuportal: waitlist booked, reservation #%d, %s from %s.", p.ReservationID, what, when(p.Start))
	case gpuportal.NoteReservationStarts:
		link += fmt.Sprintf("/reservations/%d", p.ReservationID)
		m.Subject = T("Reservation #%d starts in 1 hour", p.ReservationID)
		lines = []string{T("Reservation #%d (%s) starts at %s (%s).", p.ReservationID, what, when(p.Start), zone)}
		m.SMS = T("gpuportal: reservation #%d starts at %s.", p.ReservationID, when(p.Start))
	case gpuportal.NoteReservationEnds:
		link += fmt.Sprintf("/reservations/%d", p.ReservationID)
		m.Subject = T("Reservation #%d ends in 40 minutes", p.ReservationID)
		lines = []string{T("Reservation #%d (%s) ends at %s (%s): save your work; its instances stop then.", p.ReservationID, what, when(p.End), zone)}
		m.SMS = T("gpuportal: reservation #%d ends at %s, save your work.", p.ReservationID, when(p.End))
		if p.ExtendHours > 0 {
			link += "#extend"
			lines = append(lines, T("You can extend it by up to %d hours now, keeping its GPUs and instances: open it and choose Extend.", p.ExtendHours))
			m.SMS = T("gpuportal: reservation #%d ends at %s; it can be extended by up to %d h now.", p.ReservationID, when(p.End), p.ExtendHours)
		}
	case gpuportal.NoteSpotInterruption:
		link += "/instances"
		at := p.Deadline.In(loc).Format("2006-01-02 15:04:05")
		if p.Kind != "" && p.Kind != gpuportal.KindSpot {
			// An on-demand instance stopped because the balance ran out
			// is no spot interruption.
			m.Subject = T("Instance #%d will be stopped", p.InstanceID)
			lines = []string{T("Instance #%d (%s) is stopped at %s (%s): %s.", p.InstanceID, what, at, zone, T(gpuportal.InterruptionReasonText(p.Reason))),
				T("Save your work now; its metadata endpoint shows the same time.")}
			m.SMS = T("gpuportal: instance #%d is stopped at %s. Save your work.", p.InstanceID, p.Deadline.In(loc).Format("15:04:05"))
			break
		}
		m.Subject = T("Spot instance #%d will be interrupted", p.InstanceID)
		lines = []string{T("Instance #%d (%s) gets SIGTERM at %s (%s), reason: %s.", p.InstanceID, what, at, zone, T(gpuportal.InterruptionReasonText(p.Reason))),
			T("Save a checkpoint now; its metadata endpoint shows the same deadline.")}
		m.SMS = T("gpuportal: spot instance #%d gets SIGTERM at %s. Checkpoint now.", p.InstanceID, p.Deadline.In(loc).Format("15:04:05"))
	case gpuportal.NoteVolumesSuspended:
		link += "/volumes"
		m.Subject = T("Your balance ran out: volumes kept until %s", when(p.Deadline))
		lines = []string{T("Your balance reached zero, so volumes %s are suspended: they are kept, unbilled, until %s (%s) and then deleted with their files.", p.VolumeNames, when(p.Deadline), zone),
			T("Top up before then to keep them; they are billed again from the hour you do.")}
		m.SMS = T("gpuportal: balance empty; volumes %s will be deleted on %s unless you top up.", p.VolumeNames, when(p.Deadline))
	case gpuportal.NoteVolumeDeleteSoon:
		link += "/volumes"
		m.Subject = T("Volume %s will be deleted on %s", p.VolumeNames, when(p.Deadline))
		lines = []string{T("Volume %s has been suspended since your balance ran out and will be deleted with its files on %s (%s). Top up to keep it.", p.VolumeNames, when(p.Deadline), zone)}
		m.SMS = T("gpuportal: volume %s will be deleted on %s unless you top up.", p.VolumeNames, when(p.Deadline))
	case gpuportal.NoteVolumeDeleted:
		link += "/volumes"
		m.Subject = T("Volume %s was deleted", p.VolumeNames)
		lines = []string{T("Volume %s was deleted with its files after 15 days with no balance to pay for it.", p.VolumeNames)}
		m.SMS = T("gpuportal: volume %s was deleted after 15 days unpaid.", p.VolumeNames)
	case gpuportal.NoteIdleStopped:
		link += "/instances"
		m.Subject = T("Instance #%d was stopped: its GPUs were idle", p.InstanceID)
		lines = []string{T("Instance #%d (%s) was stopped after %d minutes with all its GPUs at 0 %% utilisation, as its launch asked (idle stop), so it no longer draws on your balance.", p.InstanceID, what, p.Missing)}
		m.SMS = T("gpuportal: instance #%d stopped after %d idle minutes.", p.InstanceID, p.Missing)
	case gpuportal.NoteReservationLaunched:
		link += fmt.Sprintf("/reservations/%d", p.ReservationID)
		m.Subject = T("Reservation #%d has started and its work is launching", p.ReservationID)
		lines = []string{T("Reservation #%d (%s) started at %s (%s): what you asked to run is starting on its GPUs, until %s.", p.ReservationID, what, when(p.Start), zone, when(p.End))}
		m.SMS = T("gpuportal: reservation #%d started; your work is launching on its GPUs.", p.ReservationID)
	case gpuportal.NoteReservationLaunchFailed:
		link += fmt.Sprintf("/reservations/%d", p.ReservationID)
		m.Subject = T("Reservation #%d started, but its launch could not run", p.ReservationID)
		lines = []string{T("Reservation #%d (%s) started at %s (%s) and its GPUs are yours until %s, but what you asked to run on them could not start: %s", p.ReservationID, what, when(p.Start), zone, when(p.End), T(p.Reason)),
			T("Launch your work from the reservation's page.")}
		m.SMS = T("gpuportal: reservation #%d started, but its launch could not run; launch it from the reservation's page.", p.ReservationID)
	case gpuportal.NoteScheduleFailed:
		switch {
		case p.ReservationID != 0:
			link += fmt.Sprintf("/reservations/%d", p.ReservationID)
		case p.InstanceID != 0:
			link += fmt.Sprintf("/instances/%d", p.InstanceID)
		case p.JobID != 0:
			link += fmt.Sprintf("/jobs/%d", p.JobID)
		}
		m.Subject = T("Something due for you could not be done: %s", stepWords(T, p.Kind))
		lines = []string{T("The platform could not %s (%s): %s", stepWords(T, p.Kind), p.Subject, T(p.Reason)),
			T("Everything else went on as usual. The operators see this failure too, and it is tried again at the next chance.")}
		m.SMS = T("gpuportal: something due for you could not be done (%s); see the portal.", stepWords(T, p.Kind))
	case gpuportal.NoteSpotRebalance:
		link += "/instances"
		m.Subject = T("Spot instance #%d: checkpoint soon", p.InstanceID)
		lines = []string{T("Booked demand will want the GPUs of instance #%d (%s) within about half an hour: save a checkpoint now and report it; its metadata endpoint shows the rebalance recommendation.", p.InstanceID, what),
			T("The interruption notice still comes before the GPUs are needed.")}
		m.SMS = T("gpuportal: spot instance #%d may be interrupted soon; checkpoint now.", p.InstanceID)
	case gpuportal.NoteInstanceRestarted:
		link += "/instances"
		m.Subject = T("Spot instance #%d restarted", p.InstanceID)
		lines = []string{T("Instance #%d (%s) was restarted automatically after an interruption; it finds its checkpoint directory again.", p.InstanceID, what)}
		m.SMS = T("gpuportal: spot instance #%d restarted.", p.InstanceID)
	case gpuportal.NoteReservationShorted:
		link += fmt.Sprintf("/reservations/%d", p.ReservationID)
		m.Subject = T("Reservation #%d lost %d GPUs", p.ReservationID, p.Missing)
		if p.Reason == "" || p.Reason == gpuportal.ShortNodeFailure {
			lines = []string{T("A node failure took %d GPUs of reservation #%d and no replacement was free; %s is refunded for the hours left.", p.Missing, p.ReservationID, p.Refund.String())}
			m.SMS = T("gpuportal: reservation #%d lost %d GPUs to a node failure; %s refunded.", p.ReservationID, p.Missing, p.Refund.String())
			break
		}
		lines = []string{T("%d GPUs of reservation #%d could not be provided (%s); %s is refunded for the hours left.", p.Missing, p.ReservationID, T(gpuportal.ShortfallCauseText(p.Reason)), p.Refund.String())}
		m.SMS = T("gpuportal: reservation #%d is short of %d GPUs; %s refunded.", p.ReservationID, p.Missing, p.Refund.String())
	case gpuportal.NoteJobSucceeded:
		link += fmt.Sprintf("/jobs/%d", p.JobID)
		m.Subject = T("Job %s succeeded", p.JobName)
		lines = []string{T("Job %s (#%d): all %d tasks succeeded.", p.JobName, p.JobID, p.Count)}
		m.SMS = T("gpuportal: job #%d succeeded (%d tasks).", p.JobID, p.Count)
	case gpuportal.NoteJobUnpaid:
		link += "/ledger"
		m.Subject = T("Job %s is waiting for money", p.JobName)
		lines = []string{T("Job %s (#%d) starts no more tasks: your balance cannot pay for another. Top up and it carries on.", p.JobName, p.JobID)}
		m.SMS = T("gpuportal: job #%d waits for a top-up.", p.JobID)
	case gpuportal.NoteJobFailed:
		link += fmt.Sprintf("/jobs/%d", p.JobID)
		failed := make([]string, len(p.Tasks))
		for k, t := range p.Tasks {
			failed[k] = strconv.Itoa(t)
		}
		m.Subject = T("Job %s failed", p.JobName)
		lines = []string{T("Job %s (#%d) ended: %d of its %d tasks failed after every attempt.", p.JobName, p.JobID, len(p.Tasks), p.Count),
			T("Failed tasks: %s.", strings.Join(failed, ", "))}
		m.SMS = T("gpuportal: job #%d failed, %d of %d tasks failed.", p.JobID, len(p.Tasks), p.Count)
	case gpuportal.NoteAutoBookUnpaid:
		link += "/ledger"
		m.Subject = T("GPUs freed for your waitlist request, but your balance cannot pay")
		lines = []string{T("%s in %s from %s to %s (%s) could be booked for you, but what is available in your balance does not pay for it.", what, p.Region, when(p.Start), when(p.End), zone),
			T("Top up and it is booked at the next chance, if the GPUs are still free.")}
		m.SMS = T("gpuportal: your waitlist request for %s from %s could be booked; top up to book it.", what, when(p.Start))
	case gpuportal.NoteBudgetReached:
		link += "/ledger"
		b := gpuportal.Budget{}
		if p.Budget != nil {
			b = *p.Budget
		}
		m.Subject = T("You have spent %d %% of your monthly budget", b.Percent)
		lines = []string{T("This month you have spent %s of your %s budget (%d %%).", b.Spent.String(), b.Monthly.String(), b.Percent),
			T("Nothing is stopped by a budget: it only tells you. Change it on the ledger page.")}
		m.SMS = T("gpuportal: %d %% of your monthly budget spent (%s of %s).", b.Percent, b.Spent.String(), b.Monthly.String())
	case gpuportal.NoteBalanceLow:
		link += "/ledger"
		m.Subject = T("Your balance runs out at %s", when(p.RunsOutAt))
		lines = []string{T("At what your instances cost now, the %s available runs out at %s (%s).", p.Available.String(), when(p.RunsOutAt), zone),
			T("Top up, or your spot and on-demand instances get the stop notice then; reservations are paid and are not touched.")}
		m.SMS = T("gpuportal: your balance runs out at %s; top up to keep your instances.", when(p.RunsOutAt))
	case gpuportal.NoteBalanceStop:
		link += "/ledger"
		m.Subject = T("Your balance ran out: %d instances are being stopped", p.Count)
		lines = []string{T("Your balance ran out (available: %s), so %d of your spot and on-demand instances got the stop notice.", p.Available.String(), p.Count),
			T("Reservations are paid and are not touched. Top up before the notice ends to keep them.")}
		m.SMS = T("gpuportal: balance ran out, %d instances get the stop notice. Top up to keep them.", p.Count)
	case gpuportal.NoteTokensRevoked:
		link += "/settings#tokens"
		m.Subject = T("Your API tokens were revoked")
		because := T("your password was reset")
		if p.Reason == "password_change" {
			because = T("you changed your password and asked for it")
		}
		lines = []string{T("All %d API tokens of your account were revoked because %s. Scripts that used them need a new token.", p.Count, because),
			T("If you did not do this, reset your password now and contact support.")}
		m.SMS = T("gpuportal: your %d API tokens were revoked. If it was not you, reset your password.", p.Count)
	case gpuportal.NoteVerifyEmail:
		link += "/verify-email/" + p.Token
		m.Subject = T("Verify your email address for gpuportal")
		lines = []string{T("Open the link below to confirm that this address is yours; until then gpuportal sends nothing else to it. The link works once, until %s (%s).", when(p.Expires), zone),
			T("If you did not sign up, ignore this email: nothing more will come.")}
		m.SMS = T("gpuportal: verify your email with the link we sent there.")
	case gpuportal.NoteVerifyPhone:
		link += "/settings#profile"
		m.Subject = T("Your gpuportal verification code")
		lines = []string{T("Your gpuportal code is %s. It works for 10 minutes.", p.Code)}
		m.SMS = T("gpuportal code: %s (valid 10 minutes). If you did not ask for it, ignore this message.", p.Code)
	case gpuportal.NotePasswordReset:
		link += "/password-reset/" + p.Token
		m.Subject = T("Reset your gpuportal password")
		lines = []string{T("Someone (hopefully you) asked to reset the password of this account. The link below works once, until %s (%s).", when(p.Expires), zone),
			T("If it was not you, ignore this email: your password stays as it is.")}
		m.SMS = T("gpuportal: a password reset was requested; the link is in your email.")
	default:
		m.Subject = n.Kind
		lines = []string{n.Kind}
		m.SMS = "gpuportal: " + n.Kind
	}
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
