package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	stdmail "net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"

	mail "github.com/wneessen/go-mail"

	"gpuportal"
)

// Sender delivers one message to one recipient.
type Sender interface {
	Send(ctx context.Context, to string, m Message) error
}

// SMTPSender sends email through an SMTP server (wneessen/go-mail).
type SMTPSender struct {
	host     string
	port     int
	user     string
	password string
	from     string
	tls      string // none, starttls, tls
}

// NewSMTPSender reads PORTAL_SMTP_URL:
// smtp://user:pass@host:port?from=addr&tls=none|starttls|tls.
func NewSMTPSender(raw string) (*SMTPSender, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "smtp" || u.Hostname() == "" {
		return nil, fmt.Errorf("PORTAL_SMTP_URL %q: want smtp://user:pass@host:port?from=addr&tls=none|starttls|tls", gpuportal.RedactURL(raw))
	}
	s := &SMTPSender{host: u.Hostname(), port: 587, from: u.Query().Get("from"), tls: u.Query().Get("tls")}
	if p := u.Port(); p != "" {
		if s.port, err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("PORTAL_SMTP_URL port %q", p)
		}
	}
	if s.tls == "" {
		s.tls = "starttls"
	}
	if s.tls != "none" && s.tls != "starttls" && s.tls != "tls" {
		return nil, fmt.Errorf("PORTAL_SMTP_URL tls=%q: want none, starttls or tls", s.tls)
	}
	if s.from == "" {
		return nil, fmt.Errorf("PORTAL_SMTP_URL needs ?from=address")
	}
	if u.User != nil {
		s.user = u.User.Username()
		s.password, _ = u.User.Password()
	}
	return s, nil
}

// MessageID makes a Message-ID (without its angle brackets) under the
// sender's domain: 32 hex digits, a dot-atom that is always valid (RFC 5322
// §3.6.4), unlike go-mail's SetMessageID, whose random local part may end
// in a dot and whose domain is the machine's short host name.
func MessageID(from string) string {
	domain := "gpuportal.invalid"
	if addr, err := stdmail.ParseAddress(from); err == nil {
		if _, d, ok := strings.Cut(addr.Address, "@"); ok && d != "" {
			domain = d
		}
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b) + "@" + domain
}

// Send sends a text + HTML email with its attachments.
func (s *SMTPSender) Send(ctx context.Context, to string, m Message) error {
	msg := mail.NewMsg()
	if err := msg.From(s.from); err != nil {
		return err
	}
	if err := msg.To(to); err != nil {
		return err
	}
	msg.Subject(m.Subject)
	msg.SetMessageIDWithValue(MessageID(s.from))
	msg.SetBodyString(mail.TypeTextPlain, m.Text)
	msg.AddAlternativeString(mail.TypeTextHTML, m.HTML)
	for _, a := range m.Attachments {
		if err := msg.AttachReader(a.Name, bytes.NewReader(a.Data), mail.WithFileContentType(mail.ContentType(a.ContentType))); err != nil {
			return err
		}
	}
	opts := []mail.Option{mail.WithPort(s.port), mail.WithTimeout(15 * time.Second)}
	switch s.tls {
	case "none":
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	case "starttls":
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	case "tls":
		opts = append(opts, mail.WithSSL())
	}
	if s.user != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthPlain), mail.WithUsername(s.user), mail.WithPassword(s.password))
	}
	c, err := mail.NewClient(s.host, opts...)
	if err != nil {
		return err
	}
	return c.DialAndSendWithContext(ctx, msg)
}

// SMSSender posts {"to","text"} to an SMS gateway, signed with
// X-Signature: sha256=<hex HMAC-SHA256 of the body>. Anything but 2xx is a
// failure (and retried).
type SMSSender struct {
	URL    string
	Secret string
	Client *http.Client
}

// Sign returns the X-Signature header value for body.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Send posts one SMS.
func (s *SMSSender) Send(ctx context.Context, to string, m Message) error {
	body, _ := json.Marshal(map[string]string{"to": to, "text": m.SMS})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Signature", Sign(s.Secret, body))
	client := s.Client
	if client == nil {
		client = &http.Client{Timeout: 15 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		// The error names the URL, whose query may hold the gateway's key;
		// it ends up in logs and on the admin's outbox page.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			return fmt.Errorf("SMS gateway %s: %w", gpuportal.RedactURL(s.URL), urlErr.Err)
		}
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("SMS gateway: %s %s", resp.Status, bytes.TrimSpace(raw))
	}
	return nil
}
