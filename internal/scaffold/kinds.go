package scaffold

// shape is what the generated handler reads of a kind's events: the Go
// type it decodes the payload into, and the field that names what the
// event is about (its subject: the invoice, the order, the repository),
// written in the handler's row. Each follows the sender's documented
// payload and dev/samples/<kind>.json.
type shape struct {
	// Doc is where the sender documents the payload.
	Doc string
	// Payload is the body of the `type payload struct` declaration.
	Payload string
	// Subject is an expression of p (a payload) giving the subject, and
	// SubjectPath the same in the payload's terms, for errors and comments.
	Subject, SubjectPath string
	// Imports are the standard packages Payload (and Decls) need.
	Imports []string
	// Decode is the Go expression, of ev and p, that decodes the event
	// into p and gives an error; "" is ev.Decode(&p) (a JSON object).
	Decode string
	// Decls are declarations written after the payload type (a decoder
	// of the kind's own format, the subject's method).
	Decls string
	// Form is set for a kind whose bodies are forms, not JSON: its sample
	// is dev/samples/<kind>.form, and SubjectPath a parameter's name.
	Form bool
}

// SampleFile is the name of kind's sample in dev/samples (and, as
// event.<ext>, in a generated package's testdata).
func SampleFile(kind string) string {
	if shapes[kind].Form {
		return kind + ".form"
	}
	return kind + ".json"
}

var shapes = map[string]shape{
	"stripe": {
		Doc: "https://docs.stripe.com/api/events/object",
		Payload: `Type string ` + "`json:\"type\"`" + `
	Data struct {
		// Object is the Stripe object the event is about (an invoice for
		// invoice.paid): its id and its type.
		Object struct {
			ID     string ` + "`json:\"id\"`" + `
			Object string ` + "`json:\"object\"`" + `
		} ` + "`json:\"object\"`" + `
	} ` + "`json:\"data\"`",
		Subject: "p.Data.Object.ID", SubjectPath: "data.object.id",
	},
	"square": {
		Doc: "https://developer.squareup.com/docs/webhooks/overview",
		Payload: `MerchantID string ` + "`json:\"merchant_id\"`" + `
	Data       struct {
		// Type and ID name the Square object the event is about (an order
		// for order.created); Object holds it, by event.
		Type string ` + "`json:\"type\"`" + `
		ID   string ` + "`json:\"id\"`" + `
	} ` + "`json:\"data\"`",
		Subject: "p.Data.ID", SubjectPath: "data.id",
	},
	"github": {
		Doc: "https://docs.github.com/en/webhooks/webhook-events-and-payloads",
		Payload: `// Action is the event's action (opened, closed, ...); the event's
	// type (issues, push, ...) is ev.Type, from the X-GitHub-Event header.
	Action     string ` + "`json:\"action\"`" + `
	Repository struct {
		FullName string ` + "`json:\"full_name\"`" + `
	} ` + "`json:\"repository\"`",
		Subject: "p.Repository.FullName", SubjectPath: "repository.full_name",
	},
	"shopify": {
		Doc: "https://shopify.dev/docs/api/webhooks",
		Payload: `// ID is the resource's id (the order for orders/create): a JSON
	// number larger than a float64 holds exactly, so kept as its digits.
	// The topic (orders/create, ...) is ev.Type, from X-Shopify-Topic.
	ID json.Number ` + "`json:\"id\"`" + `
	Name string ` + "`json:\"name\"`",
		Subject: "p.ID.String()", SubjectPath: "id", Imports: []string{"encoding/json"},
	},
	"standard": {
		Doc: "https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md",
		Payload: `Type string ` + "`json:\"type\"`" + `
	// Data is the sender's own object; Standard Webhooks leaves its shape
	// to the sender. Most put the object's id in it.
	Data struct {
		ID string ` + "`json:\"id\"`" + `
	} ` + "`json:\"data\"`",
		Subject: "p.Data.ID", SubjectPath: "data.id",
	},
	"hmac": {
		Doc: "docs/sources/hmac.md",
		Payload: `// The shape is the sender's own: dev/samples/hmac.json's is an id, a
	// type and a data object with its own id.
	Data struct {
		ID string ` + "`json:\"id\"`" + `
	} ` + "`json:\"data\"`",
		Subject: "p.Data.ID", SubjectPath: "data.id",
	},
	"twilio": {
		Doc: "https://www.twilio.com/docs/messaging/guides/track-outbound-message-status",
		Payload: `// The form's parameters the handler reads (a message's status
	// callback): the type (message.delivered, ...) is ev.Type.
	MessageSid    string
	MessageStatus string`,
		Subject: "p.MessageSid", SubjectPath: "MessageSid", Imports: []string{"net/url"},
		Decode: "p.decode(ev.Body)", Form: true,
		Decls: `// decode reads the parameters of a Twilio form body (the body is a
// form, not JSON: ev.Decode cannot read it).
func (p *payload) decode(body []byte) error {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return fmt.Errorf("decode the form: %w", err)
	}
	p.MessageSid, p.MessageStatus = form.Get("MessageSid"), form.Get("MessageStatus")
	return nil
}`,
	},
	"hubspot": {
		Doc: "https://developers.hubspot.com/docs/api/webhooks",
		Payload: `// Events is the batch HubSpot posted (one stored event per request,
	// up to 100 of HubSpot's); the type is ev.Type, their common
	// subscriptionType or "batch".
	Events []struct {
		EventID          json.Number ` + "`json:\"eventId\"`" + `
		SubscriptionType string      ` + "`json:\"subscriptionType\"`" + `
		ObjectID         json.Number ` + "`json:\"objectId\"`" + `
	}`,
		Subject: "p.subject()", SubjectPath: "0.objectId", Imports: []string{"encoding/json"},
		Decls: `// UnmarshalJSON reads HubSpot's body, a JSON array of events.
func (p *payload) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &p.Events) }

// subject is the first event's object (the contact, the deal), "" for
// an empty batch.
func (p *payload) subject() string {
	if len(p.Events) == 0 {
		return ""
	}
	return p.Events[0].ObjectID.String()
}`,
	},
	"slack": {
		Doc: "https://api.slack.com/apis/events-api#callback-field",
		Payload: `TeamID string ` + "`json:\"team_id\"`" + `
	// Event is the inner event (an app_mention, a message, ...): its type
	// is ev.Type; the channel it happened in is the subject.
	Event struct {
		Type    string ` + "`json:\"type\"`" + `
		Channel string ` + "`json:\"channel\"`" + `
		User    string ` + "`json:\"user\"`" + `
	} ` + "`json:\"event\"`",
		Subject: "p.Event.Channel", SubjectPath: "event.channel",
	},
	"zoom": {
		Doc: "https://developers.zoom.us/docs/api/webhooks/",
		Payload: `// Event is ev.Type (meeting.started, ...); Payload.Object is what it
	// is about (a meeting, a recording, a user), by event.
	Event   string ` + "`json:\"event\"`" + `
	Payload struct {
		AccountID string ` + "`json:\"account_id\"`" + `
		Object    struct {
			ID string ` + "`json:\"id\"`" + `
		} ` + "`json:\"object\"`" + `
	} ` + "`json:\"payload\"`",
		Subject: "p.Payload.Object.ID", SubjectPath: "payload.object.id",
	},
	"meta": {
		Doc: "https://developers.facebook.com/docs/graph-api/webhooks/getting-started",
		Payload: `// Object is the product (page, instagram, whatsapp_business_account);
	// each entry is one object's changes, batched.
	Object string ` + "`json:\"object\"`" + `
	Entry  []struct {
		ID      string ` + "`json:\"id\"`" + `
		Changes []struct {
			Field string          ` + "`json:\"field\"`" + `
			Value json.RawMessage ` + "`json:\"value\"`" + `
		} ` + "`json:\"changes\"`" + `
	} ` + "`json:\"entry\"`",
		Subject: "p.Object", SubjectPath: "object", Imports: []string{"encoding/json"},
	},
}
