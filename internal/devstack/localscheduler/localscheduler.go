// Package localscheduler serves a stand-in for Amazon EventBridge
// Scheduler on a loopback port, speaking the service's REST-JSON protocol
// to the real aws-sdk-go-v2 client (service/scheduler, pointed here by
// BaseEndpoint or AWS_ENDPOINT_URL_SCHEDULER, Env): CreateSchedule (POST
// /schedules/{Name}), GetSchedule (GET /schedules/{Name}?groupName=),
// DeleteSchedule (DELETE /schedules/{Name}?groupName=) and ListSchedules
// (GET /schedules?ScheduleGroup=&NamePrefix=), with the service's errors
// (X-Amzn-ErrorType and {"Message"}: ConflictException for a name taken in
// its group, ResourceNotFoundException, ValidationException).
//
// It records the schedules and fires them: FireDue invokes the callback
// given at Start for every one-time schedule (at() expressions) whose time
// has come by the injectable clock, then deletes those whose
// ActionAfterCompletion is DELETE, as the service does after a one-time
// schedule's invocation. A callback that fails leaves the schedule to be
// fired again at the next FireDue until its RetryPolicy's
// MaximumEventAgeInSeconds has passed since its time, when it is dropped.
// Rate and cron schedules are recorded but never fired. What the real
// service does with an at() time already past is not documented; the
// stand-in fires it at the next FireDue.
//
// There is no Scheduler server to run on this machine, so this one is
// written here, and it does what the code needs. It checks that a request
// is signed for the service (the Authorization header's scope), not the
// signature; it listens on the loopback only.
//
// https://docs.aws.amazon.com/scheduler/latest/APIReference/API_CreateSchedule.html
// https://docs.aws.amazon.com/scheduler/latest/UserGuide/schedule-types.html
package localscheduler

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/webhook-inbox/webhook-inbox/internal/devstack/localendpoint"
)

// The fixed credentials the processes sign their requests with; nothing
// checks them.
const (
	AccessKeyID     = "localscheduler"
	SecretAccessKey = AccessKeyID + "-secret-key"
)

// Region and Account are what the ARNs say.
const (
	Region  = "us-east-1"
	Account = "123456789012"
)

// DefaultGroup is the group of a schedule created without one, as in the
// service.
const DefaultGroup = "default"

// Schedule is a recorded schedule, as CreateSchedule gave it.
type Schedule struct {
	Name, GroupName, Arn       string
	ScheduleExpression         string
	ScheduleExpressionTimezone string
	ActionAfterCompletion      string
	FlexibleTimeWindowMode     string
	State                      string
	Target                     Target
	// At is the time of an at() expression in its time zone, zero for
	// rate and cron.
	At           time.Time
	CreationDate time.Time
}

// Target is a schedule's target.
type Target struct {
	Arn, RoleArn, Input string
	RetryPolicy         *RetryPolicy
}

// RetryPolicy is a target's retry policy.
type RetryPolicy struct {
	MaximumEventAgeInSeconds int
	MaximumRetryAttempts     int
}

// Fired is one invocation FireDue made.
type Fired struct {
	Schedule Schedule
	At       time.Time // the clock's time when it was fired
	Err      error
}

// Options configures Start.
type Options struct {
	// Now is the clock that says which schedules are due; nil is time.Now.
	Now func() time.Time
	// Fire invokes a due schedule's target; nil records the firing only.
	Fire func(ctx context.Context, s Schedule) error
}

// Server is a running stand-in. Its methods are safe for concurrent use.
type Server struct {
	*localendpoint.Server
	now func() time.Time

	fireMu sync.Mutex // one FireDue at a time
	fire   func(ctx context.Context, s Schedule) error

	mu        sync.Mutex
	schedules map[string]*Schedule // by group + "/" + name
	fired     []Fired
	requests  int
}

// Start serves on a free loopback port until Close.
func Start(o Options) (*Server, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{now: o.Now, fire: o.Fire, schedules: map[string]*Schedule{}}
	srv, err := localendpoint.Start("AWS_ENDPOINT_URL_SCHEDULER", AccessKeyID, http.HandlerFunc(s.serve))
	if err != nil {
		return nil, err
	}
	s.Server = srv
	return s, nil
}

// Schedules returns the schedules recorded, by group and name.
func (s *Server) Schedules() []Schedule {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Schedule, 0, len(s.schedules))
	for _, sc := range s.schedules {
		out = append(out, *sc)
	}
	slices.SortFunc(out, func(a, b Schedule) int { return strings.Compare(a.GroupName+"/"+a.Name, b.GroupName+"/"+b.Name) })
	return out
}

// Get returns the schedule name in group.
func (s *Server) Get(group, name string) (Schedule, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, ok := s.schedules[group+"/"+name]
	if !ok {
		return Schedule{}, false
	}
	return *sc, true
}

// Fired returns every firing so far, oldest first.
func (s *Server) Fired() []Fired {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Fired(nil), s.fired...)
}

// Requests returns how many requests the server answered.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// FireDue fires every enabled one-time schedule whose time has come, in
// time order (then by group and name), and returns what it fired. A schedule whose target succeeded
// is deleted (ActionAfterCompletion DELETE) or kept, never to fire again
// (NONE); one whose target failed is kept for the next FireDue, until its
// maximum event age has passed.
func (s *Server) FireDue(ctx context.Context) []Fired {
	s.fireMu.Lock()
	defer s.fireMu.Unlock()
	now := s.now()
	s.mu.Lock()
	var due []Schedule
	for _, sc := range s.schedules {
		if sc.State == "ENABLED" && !sc.At.IsZero() && !sc.At.After(now) {
			due = append(due, *sc)
		}
	}
	s.mu.Unlock()
	// Time order; schedules of one time by group and name, so that the
	// order never depends on the map's.
	slices.SortFunc(due, func(a, b Schedule) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.GroupName+"/"+a.Name, b.GroupName+"/"+b.Name))
	})
	var out []Fired
	for _, sc := range due {
		var err error
		if s.fire != nil {
			err = s.fire(ctx, sc)
		}
		f := Fired{Schedule: sc, At: now, Err: err}
		out = append(out, f)
		s.mu.Lock()
		s.fired = append(s.fired, f)
		key := sc.GroupName + "/" + sc.Name
		maxAge := 24 * time.Hour // the service's default maximum event age
		if sc.Target.RetryPolicy != nil {
			maxAge = time.Duration(sc.Target.RetryPolicy.MaximumEventAgeInSeconds) * time.Second
		}
		switch {
		case err != nil && now.Sub(sc.At) < maxAge:
			// Fired again at the next FireDue.
		case sc.ActionAfterCompletion == "DELETE":
			delete(s.schedules, key)
		default:
			if cur, ok := s.schedules[key]; ok {
				cur.State = "DISABLED" // done: never fired again
			}
		}
		s.mu.Unlock()
	}
	return out
}

// Run fires due schedules every interval until ctx ends.
func (s *Server) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.FireDue(ctx)
		}
	}
}

// The request and answer documents (API reference: CreateSchedule,
// GetSchedule, ListSchedules). Timestamps are epoch seconds, as the
// REST-JSON protocol writes them.
type createInput struct {
	ActionAfterCompletion      string   `json:"ActionAfterCompletion"`
	ClientToken                string   `json:"ClientToken"`
	Description                string   `json:"Description"`
	FlexibleTimeWindow         *ftw     `json:"FlexibleTimeWindow"`
	GroupName                  string   `json:"GroupName"`
	ScheduleExpression         string   `json:"ScheduleExpression"`
	ScheduleExpressionTimezone string   `json:"ScheduleExpressionTimezone"`
	State                      string   `json:"State"`
	Target                     *wTarget `json:"Target"`
}

type ftw struct {
	Mode                   string `json:"Mode"`
	MaximumWindowInMinutes *int   `json:"MaximumWindowInMinutes,omitempty"`
}

type wTarget struct {
	Arn         string       `json:"Arn"`
	RoleArn     string       `json:"RoleArn"`
	Input       string       `json:"Input,omitempty"`
	RetryPolicy *RetryPolicy `json:"RetryPolicy,omitempty"`
}

type getOutput struct {
	ActionAfterCompletion      string   `json:"ActionAfterCompletion"`
	Arn                        string   `json:"Arn"`
	CreationDate               float64  `json:"CreationDate"`
	FlexibleTimeWindow         ftw      `json:"FlexibleTimeWindow"`
	GroupName                  string   `json:"GroupName"`
	LastModificationDate       float64  `json:"LastModificationDate"`
	Name                       string   `json:"Name"`
	ScheduleExpression         string   `json:"ScheduleExpression"`
	ScheduleExpressionTimezone string   `json:"ScheduleExpressionTimezone,omitempty"`
	State                      string   `json:"State"`
	Target                     *wTarget `json:"Target"`
}

type summary struct {
	Arn                  string            `json:"Arn"`
	CreationDate         float64           `json:"CreationDate"`
	GroupName            string            `json:"GroupName"`
	LastModificationDate float64           `json:"LastModificationDate"`
	Name                 string            `json:"Name"`
	State                string            `json:"State"`
	Target               map[string]string `json:"Target"`
}

// Names and groups: 1 to 64 of these (API reference, Name).
var namePattern = regexp.MustCompile(`^[0-9a-zA-Z\-_.]{1,64}$`)

// atPattern is a one-time schedule's expression.
var atPattern = regexp.MustCompile(`^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$`)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	// The SDK signs with SigV4 for the service; a request signed for
	// another (a wrong endpoint variable) is a bug in the caller's set-up.
	if auth := r.Header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") || !strings.Contains(auth, "/scheduler/aws4_request") {
		fail(w, http.StatusForbidden, "AccessDeniedException", "the request is not signed for scheduler")
		return
	}
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()
	name, isOne := strings.CutPrefix(r.URL.Path, "/schedules/")
	switch {
	case r.URL.Path == "/schedules" && r.Method == http.MethodGet:
		s.list(w, r)
	case isOne && name != "" && !strings.Contains(name, "/"):
		switch r.Method {
		case http.MethodPost:
			s.create(w, r, name)
		case http.MethodGet:
			s.get(w, r.URL.Query().Get("groupName"), name)
		case http.MethodDelete:
			s.delete(w, r.URL.Query().Get("groupName"), name)
		default:
			fail(w, http.StatusBadRequest, "ValidationException", "the stand-in does not serve "+r.Method+" "+r.URL.Path)
		}
	default:
		fail(w, http.StatusBadRequest, "ValidationException", "the stand-in serves CreateSchedule, GetSchedule, DeleteSchedule and ListSchedules only, not "+r.Method+" "+r.URL.Path)
	}
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, name string) {
	var in createInput
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		fail(w, http.StatusBadRequest, "ValidationException", "the body is not a CreateSchedule document")
		return
	}
	group := cmp.Or(in.GroupName, DefaultGroup)
	sc := &Schedule{
		Name: name, GroupName: group,
		Arn:                fmt.Sprintf("arn:aws:scheduler:%s:%s:schedule/%s/%s", Region, Account, group, name),
		ScheduleExpression: in.ScheduleExpression, ScheduleExpressionTimezone: in.ScheduleExpressionTimezone,
		ActionAfterCompletion: cmp.Or(in.ActionAfterCompletion, "NONE"), State: cmp.Or(in.State, "ENABLED"),
		CreationDate: s.now(),
	}
	if err := validate(in, sc); err != nil {
		fail(w, http.StatusBadRequest, "ValidationException", err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := group + "/" + name
	if _, taken := s.schedules[key]; taken {
		fail(w, http.StatusConflict, "ConflictException", fmt.Sprintf("Schedule %s already exists.", name))
		return
	}
	s.schedules[key] = sc
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"ScheduleArn": sc.Arn})
}

// validate checks what the service requires and fills in the schedule.
func validate(in createInput, sc *Schedule) error {
	var errs []error
	if !namePattern.MatchString(sc.Name) || !namePattern.MatchString(sc.GroupName) {
		errs = append(errs, errors.New("Name and GroupName must be 1 to 64 of 0-9, a-z, A-Z, '-', '_' and '.'"))
	}
	if in.FlexibleTimeWindow == nil || (in.FlexibleTimeWindow.Mode != "OFF" && in.FlexibleTimeWindow.Mode != "FLEXIBLE") {
		errs = append(errs, errors.New("FlexibleTimeWindow.Mode must be OFF or FLEXIBLE"))
	} else {
		sc.FlexibleTimeWindowMode = in.FlexibleTimeWindow.Mode
	}
	if in.Target == nil || in.Target.Arn == "" || in.Target.RoleArn == "" {
		errs = append(errs, errors.New("Target with Arn and RoleArn is required"))
	} else {
		sc.Target = Target{Arn: in.Target.Arn, RoleArn: in.Target.RoleArn, Input: in.Target.Input, RetryPolicy: in.Target.RetryPolicy}
		if rp := in.Target.RetryPolicy; rp != nil && (rp.MaximumEventAgeInSeconds < 60 || rp.MaximumEventAgeInSeconds > 86400 ||
			rp.MaximumRetryAttempts < 0 || rp.MaximumRetryAttempts > 185) {
			errs = append(errs, errors.New("RetryPolicy: MaximumEventAgeInSeconds must be 60 to 86400, MaximumRetryAttempts 0 to 185"))
		}
	}
	if sc.ActionAfterCompletion != "NONE" && sc.ActionAfterCompletion != "DELETE" {
		errs = append(errs, errors.New("ActionAfterCompletion must be NONE or DELETE"))
	}
	if sc.State != "ENABLED" && sc.State != "DISABLED" {
		errs = append(errs, errors.New("State must be ENABLED or DISABLED"))
	}
	switch expr := in.ScheduleExpression; {
	case strings.HasPrefix(expr, "at("):
		at, err := ParseAt(expr, in.ScheduleExpressionTimezone)
		if err != nil {
			errs = append(errs, fmt.Errorf("ScheduleExpression: %w", err))
		}
		sc.At = at
	case strings.HasPrefix(expr, "rate(") || strings.HasPrefix(expr, "cron("):
	default:
		errs = append(errs, fmt.Errorf("ScheduleExpression %q is not at(yyyy-mm-ddThh:mm:ss), rate(...) or cron(...)", expr))
	}
	return errors.Join(errs...)
}

func (s *Server) get(w http.ResponseWriter, group, name string) {
	s.mu.Lock()
	sc, ok := s.schedules[cmp.Or(group, DefaultGroup)+"/"+name]
	var out getOutput
	if ok {
		out = getOutput{
			ActionAfterCompletion: sc.ActionAfterCompletion, Arn: sc.Arn, CreationDate: epoch(sc.CreationDate),
			FlexibleTimeWindow: ftw{Mode: sc.FlexibleTimeWindowMode}, GroupName: sc.GroupName, LastModificationDate: epoch(sc.CreationDate),
			Name: sc.Name, ScheduleExpression: sc.ScheduleExpression, ScheduleExpressionTimezone: sc.ScheduleExpressionTimezone,
			State: sc.State, Target: &wTarget{Arn: sc.Target.Arn, RoleArn: sc.Target.RoleArn, Input: sc.Target.Input, RetryPolicy: sc.Target.RetryPolicy},
		}
	}
	s.mu.Unlock()
	if !ok {
		fail(w, http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("Schedule %s does not exist.", name))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Server) delete(w http.ResponseWriter, group, name string) {
	s.mu.Lock()
	key := cmp.Or(group, DefaultGroup) + "/" + name
	_, ok := s.schedules[key]
	delete(s.schedules, key)
	s.mu.Unlock()
	if !ok {
		fail(w, http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("Schedule %s does not exist.", name))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte("{}"))
}

// list answers every matching schedule in one page.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	group, prefix, state := q.Get("ScheduleGroup"), q.Get("NamePrefix"), q.Get("State")
	out := struct {
		Schedules []summary `json:"Schedules"`
	}{Schedules: []summary{}}
	for _, sc := range s.Schedules() {
		if (group != "" && sc.GroupName != group) || !strings.HasPrefix(sc.Name, prefix) || (state != "" && sc.State != state) {
			continue
		}
		out.Schedules = append(out.Schedules, summary{Arn: sc.Arn, CreationDate: epoch(sc.CreationDate), GroupName: sc.GroupName,
			LastModificationDate: epoch(sc.CreationDate), Name: sc.Name, State: sc.State, Target: map[string]string{"Arn": sc.Target.Arn}})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// fail answers an error as the REST-JSON protocol does: the type in
// X-Amzn-ErrorType (the SDK turns it into the error's code) and a message.
func fail(w http.ResponseWriter, status int, typ, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Message": message})
}

func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

// ParseAt returns the time of an at() expression in tz (UTC when empty).
func ParseAt(expr, tz string) (time.Time, error) {
	m := atPattern.FindStringSubmatch(expr)
	if m == nil {
		return time.Time{}, fmt.Errorf("%q is not at(yyyy-mm-ddThh:mm:ss)", expr)
	}
	loc := time.UTC
	if tz != "" {
		var err error
		if loc, err = time.LoadLocation(tz); err != nil {
			return time.Time{}, fmt.Errorf("ScheduleExpressionTimezone %q is not a time zone", tz)
		}
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05", m[1], loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a valid date and time", expr)
	}
	return t, nil
}
