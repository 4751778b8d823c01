package gpuportal

import (
	"net/url"
	"regexp"
	"strings"
)

// secretParams are query parameters and key=value settings whose values
// are secrets (PostgreSQL takes password= and sslpassword= both in a URL's
// query and in its keyword/value form).
var secretParams = map[string]bool{"password": true, "sslpassword": true, "pass": true, "secret": true, "token": true}

var keywordSecret = regexp.MustCompile(`(?i)\b(password|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s]*)`)

// RedactURL returns a database, SMTP or gateway address fit for logs and
// error messages: the password of its user info, the values of secret
// query parameters and of password= settings are replaced by "xxxxx".
// Something that does not parse as a URL is redacted as keyword/value
// settings, and the user info before the host is dropped.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		s := keywordSecret.ReplaceAllString(raw, "$1=xxxxx")
		if i := strings.Index(s, "://"); i >= 0 {
			rest := s[i+3:]
			authority := rest
			if end := strings.IndexAny(rest, "/?#"); end >= 0 {
				authority = rest[:end]
			}
			if j := strings.LastIndex(authority, "@"); j >= 0 {
				s = s[:i+3] + "xxxxx" + rest[j:]
			}
		}
		return s
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if secretParams[strings.ToLower(k)] {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}
