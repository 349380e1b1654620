package brokercreds

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

func jwt(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(claims)) + "." + enc([]byte("signature"))
}

func cert(t *testing.T, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "member"}, NotBefore: t0.Add(-day), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestExpiry(t *testing.T) {
	exp := t0.Add(365 * day)
	for _, tc := range []struct {
		name    string
		token   string
		cert    []byte
		want    time.Time
		known   bool
		wantErr string
	}{
		{name: "nothing", known: false},
		{name: "a ServiceAccount token", token: jwt(`{"exp":` + itoa(exp.Unix()) + `,"sub":"system:serviceaccount:b:member-east"}`), want: exp, known: true},
		{name: "exp in exponent form", token: jwt(`{"exp":1.8e9}`), want: time.Unix(1.8e9, 0).UTC(), known: true},
		{name: "padded claims", token: strings.Replace(jwt(`{"exp":1800000000}`), ".", "==.", 1), want: time.Unix(1800000000, 0).UTC(), known: true},
		{name: "a legacy token without exp", token: jwt(`{"sub":"system:serviceaccount:b:member-east"}`), known: false},
		{name: "an opaque token", token: "abcdef.0123456789abcdef", known: false},
		{name: "claims not base64", token: "a.!!!.c", wantErr: "not base64url"},
		{name: "claims not JSON", token: "a." + base64.RawURLEncoding.EncodeToString([]byte("nope")) + ".c", wantErr: "not JSON"},
		{name: "exp a string", token: jwt(`{"exp":"soon"}`), wantErr: "not JSON"},
		{name: "exp negative", token: jwt(`{"exp":-5}`), wantErr: "not a positive number"},
		{name: "a client certificate", cert: cert(t, t0.Add(90*day)), want: t0.Add(90 * day), known: true},
		{name: "the earlier of token and certificate", token: jwt(`{"exp":` + itoa(exp.Unix()) + `}`), cert: cert(t, t0.Add(90*day)), want: t0.Add(90 * day), known: true},
		{name: "certificate later than the token", token: jwt(`{"exp":` + itoa(t0.Add(day).Unix()) + `}`), cert: cert(t, t0.Add(90*day)), want: t0.Add(day), known: true},
		{name: "garbage certificate", cert: []byte("not pem"), wantErr: "not a PEM certificate"},
		{name: "bad token, good certificate: the certificate's expiry and the error", token: "a.!!!.c", cert: cert(t, t0.Add(90*day)), want: t0.Add(90 * day), known: true, wantErr: "not base64url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, known, err := Expiry(tc.token, tc.cert)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if known != tc.known || !got.Equal(tc.want) {
				t.Fatalf("Expiry = %s, %v; want %s, %v", got, known, tc.want, tc.known)
			}
		})
	}
}

func itoa(n int64) string { return big.NewInt(n).String() }

func TestJudge(t *testing.T) {
	const warn = 30 * day
	for _, tc := range []struct {
		name   string
		expiry time.Time
		known  bool
		want   State
	}{
		{"no expiry", time.Time{}, false, Unknown},
		{"a year left", t0.Add(365 * day), true, Valid},
		{"a second more than the warning period", t0.Add(warn + time.Second), true, Valid},
		{"exactly the warning period", t0.Add(warn), true, Expiring},
		{"a day left", t0.Add(day), true, Expiring},
		{"a second left", t0.Add(time.Second), true, Expiring},
		{"expiring now", t0, true, Expired},
		{"expired yesterday", t0.Add(-day), true, Expired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Judge(t0, tc.expiry, tc.known, warn); got != tc.want {
				t.Fatalf("Judge = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestNext(t *testing.T) {
	p := Policy{WarnBefore: 30 * day, Rewarn: time.Hour}
	year, soon, past := t0.Add(365*day), t0.Add(10*day), t0.Add(-time.Hour)
	for _, tc := range []struct {
		name       string
		prev       Seen
		now        time.Time
		expiry     time.Time
		known      bool
		wantReason string
		wantWarn   bool
		wantNote   string
		wantState  State
	}{
		{name: "start with a valid token: quiet", expiry: year, known: true, wantState: Valid},
		{name: "start with no expiry: quiet", known: false, wantState: Unknown},
		{name: "start within the warning period: warn", expiry: soon, known: true,
			wantReason: ReasonExpiring, wantWarn: true, wantNote: "in 10 days", wantState: Expiring},
		{name: "a day and a half left, said in hours", expiry: t0.Add(36 * time.Hour), known: true,
			wantReason: ReasonExpiring, wantWarn: true, wantNote: "in 36h0m0s", wantState: Expiring},
		{name: "start expired: warn expired", expiry: past, known: true,
			wantReason: ReasonExpired, wantWarn: true, wantNote: "expired at", wantState: Expired},
		{name: "valid, unchanged: quiet", prev: Seen{Expiry: year, Known: true, State: Valid}, expiry: year, known: true, wantState: Valid},
		{name: "time enters the warning period: warn",
			prev: Seen{Expiry: soon, Known: true, State: Valid}, expiry: soon, known: true,
			wantReason: ReasonExpiring, wantWarn: true, wantNote: "join --renew", wantState: Expiring},
		{name: "warned a minute ago: quiet",
			prev: Seen{Expiry: soon, Known: true, State: Expiring, WarnedAt: t0.Add(-time.Minute)}, expiry: soon, known: true, wantState: Expiring},
		{name: "warned an hour ago: warn again before the event expires",
			prev: Seen{Expiry: soon, Known: true, State: Expiring, WarnedAt: t0.Add(-time.Hour)}, expiry: soon, known: true,
			wantReason: ReasonExpiring, wantWarn: true, wantState: Expiring},
		{name: "expiring turns expired: warn at once",
			prev: Seen{Expiry: past, Known: true, State: Expiring, WarnedAt: t0.Add(-time.Minute)}, expiry: past, known: true,
			wantReason: ReasonExpired, wantWarn: true, wantState: Expired},
		{name: "renewed while warned: normal event, warning cleared",
			prev: Seen{Expiry: soon, Known: true, State: Expiring, WarnedAt: t0.Add(-time.Minute)}, expiry: year, known: true,
			wantReason: ReasonRenewed, wantNote: year.Format(time.RFC3339), wantState: Valid},
		{name: "renewed after expiry",
			prev: Seen{Expiry: past, Known: true, State: Expired, WarnedAt: t0.Add(-time.Minute)}, expiry: year, known: true,
			wantReason: ReasonRenewed, wantState: Valid},
		{name: "renewed early, long before any warning",
			prev: Seen{Expiry: year.Add(-day), Known: true, State: Valid}, expiry: year, known: true,
			wantReason: ReasonRenewed, wantState: Valid},
		{name: "renewed with a token still inside the warning period: warn with the new date",
			prev: Seen{Expiry: t0.Add(day), Known: true, State: Expiring, WarnedAt: t0.Add(-time.Minute)}, expiry: soon, known: true,
			wantReason: ReasonExpiring, wantWarn: true, wantNote: soon.Format(time.RFC3339), wantState: Expiring},
		{name: "replaced with credentials without expiry",
			prev: Seen{Expiry: soon, Known: true, State: Expiring, WarnedAt: t0.Add(-time.Minute)}, known: false,
			wantReason: ReasonRenewed, wantNote: "no expiry", wantState: Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			ev, next := p.Next(tc.prev, now, tc.expiry, tc.known)
			if ev.Reason != tc.wantReason || ev.Warning != tc.wantWarn {
				t.Fatalf("event %+v, want reason %q warning %v", ev, tc.wantReason, tc.wantWarn)
			}
			if !strings.Contains(ev.Note, tc.wantNote) {
				t.Fatalf("note %q does not say %q", ev.Note, tc.wantNote)
			}
			if next.State != tc.wantState || !next.Expiry.Equal(tc.expiry) || next.Known != tc.known {
				t.Fatalf("next %+v, want state %s expiry %s", next, tc.wantState, tc.expiry)
			}
			if ev.Warning != (next.WarnedAt.Equal(now)) && ev.Reason != "" {
				t.Fatalf("WarnedAt %s after event %+v", next.WarnedAt, ev)
			}
			if (next.State == Valid || next.State == Unknown) && !next.WarnedAt.IsZero() {
				t.Fatalf("a cleared warning keeps WarnedAt %s", next.WarnedAt)
			}
		})
	}
}
