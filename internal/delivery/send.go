package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/geogate/geogate/internal/outbox"
	"github.com/geogate/geogate/internal/webhook"
)

// ContentType is the CloudEvents structured mode's media type.
const ContentType = "application/cloudevents+json"

// maxDrain is how much of an answer's body is read, so that the
// connection can carry the next delivery; the rest is dropped with it.
const maxDrain = 64 << 10

// maxWhy bounds the error recorded for a failed attempt.
const maxWhy = 200

// sender posts events to webhooks.
type sender struct {
	client  *http.Client
	timeout time.Duration
}

func newSender(timeout time.Duration, allowPrivate bool) *sender {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	if !allowPrivate {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: webhook.RefusePrivate}
		tr.DialContext = d.DialContext
		tr.Proxy = nil
	}
	return &sender{timeout: timeout, client: &http.Client{
		Timeout:   timeout,
		Transport: tr,
		// A redirect is an answer like any other non-2xx: following it
		// would send a signed event where its subscriber did not say.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// outcome is what a receiver made of one delivery.
type outcome struct {
	ok bool
	// why the delivery failed, short and without secrets.
	why string
	// retryAfter is the receiver's Retry-After on a 429 or 503.
	retryAfter time.Duration
}

// post sends c, signed, at now.
func (s *sender) post(ctx context.Context, c outbox.Lease, now time.Time) outcome {
	body, err := json.Marshal(c.CloudEvent())
	if err != nil {
		return outcome{why: "event not encoded: " + err.Error()}
	}
	ts := now.Unix()
	sig := Signature(c.Secrets, c.ID, ts, body)
	if sig == "" {
		return outcome{why: "the subscription's secret cannot be read"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Webhook, bytes.NewReader(body))
	if err != nil {
		return outcome{why: "webhook URL not usable"}
	}
	req.Header.Set("Content-Type", ContentType)
	req.Header.Set("User-Agent", "geogate-webhooks/1")
	req.Header.Set("webhook-id", c.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := s.client.Do(req)
	if err != nil {
		return outcome{why: s.describe(err)}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return outcome{ok: true}
	}
	out := outcome{why: "HTTP " + strconv.Itoa(resp.StatusCode)}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		out.retryAfter = retryAfter(resp.Header.Get("Retry-After"), now)
	}
	return out
}

// describe says why a request got no answer, without its URL (which may
// hold a token).
func (s *sender) describe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Sprintf("no answer within %v", s.timeout)
		}
		err = ue.Err
	}
	if errors.Is(err, webhook.ErrPrivate) {
		return webhook.ErrPrivate.Error()
	}
	why := err.Error()
	if len(why) > maxWhy {
		why = why[:maxWhy]
	}
	return why
}

// retryAfter reads a Retry-After header, seconds or an HTTP date; 0 when
// there is none or it is unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
