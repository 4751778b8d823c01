package gpuportal

import (
	"crypto/rsa"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// SSHKey is a customer's public key: with it they log into their running
// instances through the portal's SSH gateway.
type SSHKey struct {
	ID     int64  `json:"id"`
	UserID int64  `json:"-"`
	Name   string `json:"name"`
	// Fingerprint is as `ssh-keygen -l` prints it (SHA256:…).
	Fingerprint string    `json:"fingerprint"`
	Type        string    `json:"type"`
	PublicKey   string    `json:"public_key"` // one authorized_keys line, without options
	CreatedAt   time.Time `json:"created_at"`
}

// Limits on SSH keys.
const (
	MaxSSHKeysPerUser  = 50
	MinRSABits         = 2048
	MaxSSHKeyNameChars = 100
)

// ParseSSHKey reads one OpenSSH authorized_keys line (options are not
// allowed: the gateway decides what a key may do) and checks it is a key
// the gateway accepts: ed25519, ECDSA, or RSA of at least 2048 bits. The
// name defaults to the line's comment.
func ParseSSHKey(name, line string) (SSHKey, error) {
	line = strings.TrimSpace(line)
	if line == "" {
		return SSHKey{}, FieldErrorf(EINVALID, "public_key", "Paste your public key: one line like \"ssh-ed25519 AAAA… you@laptop\" (the .pub file, never the private key).")
	}
	if strings.Contains(line, "PRIVATE KEY") {
		return SSHKey{}, FieldErrorf(EINVALID, "public_key", "That is a private key: never share it. Paste the .pub file instead.")
	}
	pub, comment, options, rest, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return SSHKey{}, FieldErrorf(EINVALID, "public_key", "That is not an OpenSSH public key line (like \"ssh-ed25519 AAAA… you@laptop\").")
	}
	if len(options) > 0 || strings.TrimSpace(string(rest)) != "" {
		return SSHKey{}, FieldErrorf(EINVALID, "public_key", "Paste one key, without authorized_keys options.")
	}
	switch pub.Type() {
	case ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521, ssh.KeyAlgoSKED25519, ssh.KeyAlgoSKECDSA256:
	case ssh.KeyAlgoRSA:
		ck, ok := pub.(ssh.CryptoPublicKey)
		if k, isRSA := ck.CryptoPublicKey().(*rsa.PublicKey); !ok || !isRSA || k.N.BitLen() < MinRSABits {
			return SSHKey{}, FieldErrorf(EINVALID, "public_key", "RSA keys need at least %d bits; an ed25519 key (ssh-keygen -t ed25519) is better still.", MinRSABits)
		}
	default:
		return SSHKey{}, FieldErrorf(EINVALID, "public_key", "%s keys are not accepted: use ed25519, ECDSA or RSA of at least %d bits.", pub.Type(), MinRSABits)
	}
	name = strings.TrimSpace(name)
	if name == "" {
		name = strings.TrimSpace(comment)
	}
	if name == "" {
		name = pub.Type()
	}
	if len([]rune(name)) > MaxSSHKeyNameChars {
		return SSHKey{}, FieldErrorf(EINVALID, "name", "The name is longer than %d characters.", MaxSSHKeyNameChars)
	}
	return SSHKey{Name: name, Type: pub.Type(), Fingerprint: ssh.FingerprintSHA256(pub),
		PublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))}, nil
}
