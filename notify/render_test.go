package notify_test

import (
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/notify"
	"gpuportal/store/storetest"
)

// (issue 22, item 16) Every notification kind renders in both languages:
// a subject, an email body and an SMS that are words, never the raw kind
// ("balance_low" as subject and body was what customers got).
func TestEveryKindRendersInBothLanguages(t *testing.T) {
	at := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	p := gpuportal.NoteParams{ReservationID: 7, InstanceID: 8, EntryID: 9, JobID: 10, JobName: "render", Model: "a100-80g", ModelName: "NVIDIA A100 80GB",
		Region: "cd-1", Count: 2, Start: at, End: at.Add(4 * time.Hour), Price: 12800, Refund: 100, Expires: at, Deadline: at, RunsOutAt: at,
		Reason: string(gpuportal.ReasonBalance), Available: 250, Missing: 1, Tasks: []int{3}, Token: "gpr_x"}
	for _, kind := range gpuportal.NoteKinds {
		en := notify.Render(gpuportal.Notification{Kind: kind, Params: p}, "en", "https://portal.example", storetest.Shanghai)
		zh := notify.Render(gpuportal.Notification{Kind: kind, Params: p}, "zh-CN", "https://portal.example", storetest.Shanghai)
		for lang, m := range map[string]notify.Message{"en": en, "zh-CN": zh} {
			if m.Subject == "" || m.SMS == "" || strings.Contains(m.Subject, kind) || strings.Contains(m.Text, kind) || strings.Contains(m.SMS, kind) {
				t.Errorf("%s in %s has no message of its own: %q / %q / %q", kind, lang, m.Subject, m.Text, m.SMS)
			}
		}
		if en.Subject == zh.Subject || en.SMS == zh.SMS {
			t.Errorf("%s is not translated: %q / %q", kind, en.Subject, en.SMS)
		}
		// No customer-chosen text (a job's name) in an SMS.
		if strings.Contains(en.SMS, p.JobName) || strings.Contains(zh.SMS, p.JobName) {
			t.Errorf("%s puts the job's name in an SMS: %q", kind, en.SMS)
		}
	}
	// An on-demand instance stopped for lack of money is no spot
	// interruption.
	od := p
	od.Kind = string(gpuportal.KindOnDemand)
	if m := notify.Render(gpuportal.Notification{Kind: gpuportal.NoteSpotInterruption, Params: od}, "en", "", storetest.Shanghai); strings.Contains(m.Subject, "Spot") || strings.Contains(m.Text, "SIGTERM") {
		t.Errorf("on-demand balance stop reads %q / %q", m.Subject, m.Text)
	}
}

// (issue 28) An interruption notice names its reason in words, in the
// reader's language: "reason: admin" is what customers read before.
func TestInterruptionReasonsInWords(t *testing.T) {
	at := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	for _, reason := range gpuportal.InterruptionReasons {
		p := gpuportal.NoteParams{InstanceID: 8, Model: "a100-80g", Region: "cd-1", Count: 1, Deadline: at, Reason: string(reason), Kind: string(gpuportal.KindSpot)}
		words := gpuportal.InterruptionReasonText(reason)
		en := notify.Render(gpuportal.Notification{Kind: gpuportal.NoteSpotInterruption, Params: p}, "en", "", storetest.Shanghai)
		zh := notify.Render(gpuportal.Notification{Kind: gpuportal.NoteSpotInterruption, Params: p}, "zh-CN", "", storetest.Shanghai)
		if words == string(reason) || !strings.Contains(en.Text, words) {
			t.Errorf("%s: the English notice %q does not say %q", reason, en.Text, words)
		}
		if strings.Contains(zh.Text, words) || strings.Contains(zh.Text, string(reason)) {
			t.Errorf("%s: the Chinese notice is not translated: %q", reason, zh.Text)
		}
	}
}
