package gpuportal

import (
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for _, tt := range []struct{ in, secret string }{
		{"postgres://app:s3cret-pw@db.example:5432/portal?sslmode=require", "s3cret-pw"},
		{"postgres://app@db.example/portal?password=s3cret-pw&sslmode=disable", "s3cret-pw"},
		{"postgresql://db.example/portal?sslpassword=s3cret-pw", "s3cret-pw"},
		{"host=db.example user=app password=s3cret-pw dbname=portal", "s3cret-pw"},
		{"host=db.example password='s3cret pw' dbname=portal", "s3cret pw"},
		{"smtp://mailer:s3cret-pw@smtp.example:587?from=noreply@example.com&tls=starttls", "s3cret-pw"},
		{"smtp://mailer:s3cret-pw@smtp.example:bad-port?from=a@b", "s3cret-pw"},
		{"smtp://mailer:s3cret%pw@smtp.example", "s3cret%pw"}, // does not parse
	} {
		got := RedactURL(tt.in)
		if strings.Contains(got, tt.secret) || strings.Contains(got, "s3cret") {
			t.Errorf("RedactURL(%q) = %q: the secret is still there", tt.in, got)
		}
		if !strings.Contains(got, "example") && !strings.Contains(got, "db.") {
			t.Errorf("RedactURL(%q) = %q: lost the host", tt.in, got)
		}
	}
	if got := RedactURL("data/portal.db"); got != "data/portal.db" {
		t.Errorf("a file path changed: %q", got)
	}
}
