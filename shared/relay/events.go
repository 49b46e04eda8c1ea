package relay

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/webhook-inbox/webhook-inbox/shared/cfnresponse"

	"github.com/webhook-inbox/webhook-inbox/shared/wake"
)

// event is one invocation's event, of one of the shapes the relay knows.
type event struct {
	objects []objectCreated      // S3, either shape
	secret  *secretLabel         // Secrets Manager through EventBridge
	request *cfnresponse.Request // CloudFormation custom resource
}

// objectCreated is one object's creation, as either of S3's shapes says it.
type objectCreated struct {
	bucket, key string
	// keyErr is set when the key could not be decoded.
	keyErr error
	// created is false for a record of another event (a deletion).
	created bool
}

// secretLabel is a Secret Label Updated event's detail.
type secretLabel struct {
	resources []string
	name      string
	label     string
	versionID string
}

// s3Notification is S3's event notification: {"Records": [...]}, keys
// URL-encoded ("red flower.jpg" arrives as "red+flower.jpg", a colon as
// %3A).
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html
type s3Notification struct {
	Records []struct {
		EventSource string   `json:"eventSource"`
		EventName   string   `json:"eventName"`
		S3          s3Object `json:"s3"`
	} `json:"Records"`
}

// s3Object names an object as both of S3's shapes do: a notification
// record's "s3", an EventBridge event's "detail".
type s3Object struct {
	Bucket struct {
		Name string `json:"name"`
	} `json:"bucket"`
	Object struct {
		Key string `json:"key"`
	} `json:"object"`
}

// eventBridgeEvent is EventBridge's envelope, with the detail of S3's
// Object Created and of Secrets Manager's Secret Label Updated.
// https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html
// https://docs.aws.amazon.com/secretsmanager/latest/userguide/event-detail-secret-label-updated-secretsmanager.html
type eventBridgeEvent struct {
	Source     string   `json:"source"`
	DetailType string   `json:"detail-type"`
	Resources  []string `json:"resources"`
	Detail     struct {
		s3Object // S3's
		// Secrets Manager
		Name         string `json:"name"`
		LabelUpdated string `json:"labelUpdated"`
		VersionID    string `json:"versionId"`
	} `json:"detail"`
}

// The shapes' markers.
const (
	s3EventSource          = "aws:s3"
	s3Source               = "aws.s3"
	s3ObjectCreated        = "Object Created"
	secretsSource          = "aws.secretsmanager"
	secretLabelUpdated     = "Secret Label Updated"
	s3ObjectCreatedPrefix  = "ObjectCreated:"
	knownShapes            = "an S3 event notification (Records with eventSource aws:s3), EventBridge's Object Created from aws.s3 or Secret Label Updated from aws.secretsmanager, or a CloudFormation custom resource request"
	maxUnknownKeysInAnswer = 10
)

// parse tells which of the known shapes raw is. It never panics: any input
// is an event or an error naming the shapes it knows.
func parse(raw json.RawMessage) (event, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return event{}, fmt.Errorf("relay: the event is not a JSON object; the relay takes %s", knownShapes)
	}
	switch {
	case top["Records"] != nil:
		var n s3Notification
		if err := json.Unmarshal(raw, &n); err != nil {
			return event{}, fmt.Errorf("relay: the event has Records but is not an S3 event notification: %w", err)
		}
		if len(n.Records) == 0 {
			return event{}, errors.New("relay: the S3 event notification has no record")
		}
		var out []objectCreated
		for _, rec := range n.Records {
			if rec.EventSource != s3EventSource {
				return event{}, fmt.Errorf("relay: a record's eventSource is %q, not %s; the relay takes %s", rec.EventSource, s3EventSource, knownShapes)
			}
			key, err := url.QueryUnescape(rec.S3.Object.Key)
			if err != nil {
				err = fmt.Errorf("the key %q is not URL-encoded as S3's notifications encode keys", rec.S3.Object.Key)
			}
			out = append(out, objectCreated{bucket: rec.S3.Bucket.Name, key: key, keyErr: err,
				created: strings.HasPrefix(rec.EventName, s3ObjectCreatedPrefix)})
		}
		return event{objects: out}, nil
	case top["source"] != nil && top["detail-type"] != nil:
		var e eventBridgeEvent
		if err := json.Unmarshal(raw, &e); err != nil {
			return event{}, fmt.Errorf("relay: the EventBridge event does not decode: %w", err)
		}
		switch {
		case e.Source == s3Source && e.DetailType == s3ObjectCreated:
			return event{objects: []objectCreated{{bucket: e.Detail.Bucket.Name, key: e.Detail.Object.Key, created: true}}}, nil
		case e.Source == secretsSource && e.DetailType == secretLabelUpdated:
			return event{secret: &secretLabel{resources: e.Resources, name: e.Detail.Name, label: e.Detail.LabelUpdated, versionID: e.Detail.VersionID}}, nil
		}
		return event{}, fmt.Errorf("relay: an EventBridge event %q from %q; the relay takes %s", e.DetailType, e.Source, knownShapes)
	case top["RequestType"] != nil && top["ResponseURL"] != nil:
		var req cfnresponse.Request
		if err := json.Unmarshal(raw, &req); err != nil {
			return event{}, fmt.Errorf("relay: the CloudFormation request does not decode: %w", err)
		}
		return event{request: &req}, nil
	}
	keys := keysOf(top)
	if len(keys) > maxUnknownKeysInAnswer {
		keys = append(keys[:maxUnknownKeysInAnswer], "…")
	}
	return event{}, fmt.Errorf("relay: unknown event (keys %s); the relay takes %s", strings.Join(keys, ", "), knownShapes)
}

// parseArmKey reads a marker's key, wake/arm/<target>/<at>, as shared/wake
// writes it (wake.ParseArmKey). ok is false for a key outside ArmPrefix (of
// no concern); err says why a key under it cannot be read.
func parseArmKey(key string, targets map[string]string) (target string, at time.Time, ok bool, err error) {
	if !strings.HasPrefix(key, ArmPrefix) {
		return "", time.Time{}, false, nil
	}
	t, at, err := wake.ParseArmKey(key)
	if err != nil {
		return "", time.Time{}, true, err
	}
	if _, known := targets[string(t)]; !known {
		return "", time.Time{}, true, fmt.Errorf("the key %q names target %q, whose function is not configured", key, t)
	}
	return string(t), at, true, nil
}
