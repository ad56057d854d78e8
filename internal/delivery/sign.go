package delivery

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
)

// secretPrefix starts every secret: what follows is its key, in base64.
const secretPrefix = "whsec_"

// Signature is the webhook-signature header of body sent as event id at
// unix time ts: "v1,<signature>" per secret, separated by spaces. A
// signature is the base64 HMAC-SHA256, keyed with the secret's decoded
// bytes, of "<id>.<ts>.<body>" (the Standard Webhooks scheme). Secrets
// that cannot be decoded sign nothing.
func Signature(secrets []string, id string, ts int64, body []byte) string {
	var out []string
	for _, s := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, secretPrefix))
		if err != nil || len(key) == 0 {
			continue
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "."))
		mac.Write(body)
		out = append(out, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return strings.Join(out, " ")
}
