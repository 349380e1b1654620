// Package brokercreds judges a member's broker credentials: when they expire, read from the
// credentials themselves (a ServiceAccount token's exp claim, a client certificate's NotAfter),
// and which event, if any, their expiry calls for at a given moment. It is pure: the manager's
// credentials watcher feeds it the time and what it read.
package brokercreds

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Expiry returns when the earlier of a bearer token (a JWT, read without verifying: the broker
// verifies it, we only need its exp claim) and a PEM client certificate stops being accepted.
// known is false when neither carries an expiry: no credentials, a token that is not a JWT or a
// JWT without exp (a legacy ServiceAccount token Secret, which lives until it is deleted).
func Expiry(token string, certPEM []byte) (expiry time.Time, known bool, err error) {
	var errs []error
	if token != "" {
		if t, ok, err := tokenExpiry(token); err != nil {
			errs = append(errs, err)
		} else if ok {
			expiry, known = t, true
		}
	}
	if len(certPEM) > 0 {
		if t, err := certExpiry(certPEM); err != nil {
			errs = append(errs, err)
		} else if !known || t.Before(expiry) {
			expiry, known = t, true
		}
	}
	return expiry, known, errors.Join(errs...)
}

func tokenExpiry(token string) (time.Time, bool, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		// An opaque token (a static token file, a bootstrap token) says nothing about its expiry.
		return time.Time{}, false, nil
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false, fmt.Errorf("the broker token looks like a JWT but its claims are not base64url: %w", err)
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return time.Time{}, false, fmt.Errorf("the broker token looks like a JWT but its claims are not JSON: %w", err)
	}
	if claims.Exp == nil {
		return time.Time{}, false, nil
	}
	exp, err := claims.Exp.Float64()
	if err != nil || exp <= 0 {
		return time.Time{}, false, fmt.Errorf("the broker token's exp claim %q is not a positive number of seconds", claims.Exp.String())
	}
	return time.Unix(int64(exp), 0).UTC(), true, nil
}

func certExpiry(certPEM []byte) (time.Time, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return time.Time{}, errors.New("the broker client certificate is not a PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}, fmt.Errorf("parsing the broker client certificate: %w", err)
	}
	return cert.NotAfter.UTC(), nil
}

// State is how close credentials are to their expiry.
type State int

const (
	// Unknown: the credentials carry no expiry.
	Unknown State = iota
	// Valid: more than the warning period left.
	Valid
	// Expiring: within the warning period, still accepted.
	Expiring
	// Expired: the broker refuses them.
	Expired
)

func (s State) String() string {
	return [...]string{"Unknown", "Valid", "Expiring", "Expired"}[s]
}

// Judge says where credentials expiring at expiry stand at now, warning warnBefore ahead.
func Judge(now, expiry time.Time, known bool, warnBefore time.Duration) State {
	switch {
	case !known:
		return Unknown
	case !now.Before(expiry):
		return Expired
	case expiry.Sub(now) <= warnBefore:
		return Expiring
	}
	return Valid
}

// Event reasons, on the ClusterProperty clusterset.k8s.io of the member.
const (
	ReasonExpiring = "BrokerCredentialsExpiring"
	ReasonExpired  = "BrokerCredentialsExpired"
	ReasonRenewed  = "BrokerCredentialsRenewed"
)

// Seen is what was last reported about the credentials.
type Seen struct {
	Expiry   time.Time
	Known    bool
	State    State
	WarnedAt time.Time
}

// Event is one event to record; a zero Reason means none.
type Event struct {
	Warning bool
	Reason  string
	Note    string
}

// Policy says when to warn.
type Policy struct {
	// WarnBefore is how long before the expiry warnings start.
	WarnBefore time.Duration
	// Rewarn repeats a warning this often while it holds: the API server drops events after
	// an hour (its --event-ttl), and a warning nobody can see any more warns nobody.
	Rewarn time.Duration
}

// Next decides the event for credentials expiring at expiry (known says whether they carry an
// expiry at all), given what was reported before, and returns what is reported now.
func (p Policy) Next(prev Seen, now, expiry time.Time, known bool) (Event, Seen) {
	next := Seen{Expiry: expiry, Known: known, State: Judge(now, expiry, known, p.WarnBefore), WarnedAt: prev.WarnedAt}
	changed := prev.Known != known || !prev.Expiry.Equal(expiry)
	// Seen's zero value is a manager that just started: its first look renews nothing.
	renewed := prev.Known && changed
	left := remaining(expiry.Sub(now))
	at := expiry.UTC().Format(time.RFC3339)
	switch next.State {
	case Expired, Expiring:
		if !changed && next.State == prev.State && now.Sub(prev.WarnedAt) < p.Rewarn {
			return Event{}, next
		}
		next.WarnedAt = now
		if next.State == Expired {
			return Event{Warning: true, Reason: ReasonExpired, Note: fmt.Sprintf(
				"The broker credentials expired at %s: this member can no longer publish or import; run kubectl fleetslice join --renew", at)}, next
		}
		return Event{Warning: true, Reason: ReasonExpiring, Note: fmt.Sprintf(
			"The broker credentials expire at %s (in %s); run kubectl fleetslice join --renew before then", at, left)}, next
	case Valid, Unknown:
		next.WarnedAt = time.Time{}
		if !renewed {
			return Event{}, next
		}
		if !known {
			return Event{Reason: ReasonRenewed, Note: "The broker credentials were replaced with ones that carry no expiry"}, next
		}
		return Event{Reason: ReasonRenewed, Note: fmt.Sprintf("The broker credentials were renewed; they expire at %s", at)}, next
	}
	return Event{}, next
}

// remaining says a time left the way an operator reads it: days while there are several.
func remaining(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
	}
	return d.Round(time.Minute).String()
}
