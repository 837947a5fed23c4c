package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentryhq/agentry/models"

	"github.com/agentryhq/agentry/internal/scrub"
	"github.com/agentryhq/agentry/internal/textcut"
)

// An importer reads one provider's usage and cost export of one UTC day.
// It follows pagination to the end and returns every line, or an error and
// nothing: a day is stored whole or not at all.
type importer interface {
	importDay(ctx context.Context, day time.Time, key string) (lines []models.ProviderUsageLine, pages int, err error)
}

// Default base URLs of the export APIs.
const (
	OpenAIBaseURL    = "https://api.openai.com"
	AnthropicBaseURL = "https://api.anthropic.com"
)

// maxPages bounds one import (a day has one bucket; pages beyond this mean
// the API keeps answering has_more and would loop forever).
const maxPages = 1000

// ExportError is an export API's failure: an HTTP status or an answer that
// is not what the API documents. Its text never contains the admin key.
type ExportError struct {
	Provider string
	Status   int // 0 when the answer was malformed or the API unreachable
	Message  string
}

func (e *ExportError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s usage export answered HTTP %d: %s", e.Provider, e.Status, e.Message)
	}
	return fmt.Sprintf("%s usage export: %s", e.Provider, e.Message)
}

// getter does the HTTP GETs of one import with the provider's auth headers.
type getter struct {
	provider string
	client   *http.Client
	headers  map[string]string
	key      string
}

// get fetches base+path?query and decodes the JSON answer into out.
func (g *getter) get(ctx context.Context, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return &ExportError{Provider: g.provider, Message: "bad base_url: " + scrubExport(err.Error(), g.key)}
	}
	for k, v := range g.headers {
		req.Header.Set(k, v)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return &ExportError{Provider: g.provider, Message: "unreachable: " + scrubExport(err.Error(), g.key)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return &ExportError{Provider: g.provider, Message: "reading the answer: " + scrubExport(err.Error(), g.key)}
	}
	if resp.StatusCode != http.StatusOK {
		return &ExportError{Provider: g.provider, Status: resp.StatusCode, Message: scrubExport(errorText(body), g.key)}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &ExportError{Provider: g.provider, Message: "malformed answer (not the documented JSON): " + scrubExport(err.Error(), g.key)}
	}
	return nil
}

// errorText is the message of an error body ({"error": {"message"}}, both
// providers), else its start.
func errorText(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = textcut.Prefix(s, 200) + "..."
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}

// scrubExport removes the admin key (read from its variable at call time, so no
// registered source knows it) and everything the gateway-wide scrubber
// removes (registered secrets, credential-shaped strings) from a text that
// came from outside, before it is stored, logged or put in Temporal history;
// and bounds its length on a rune boundary.
func scrubExport(s, key string) string {
	if key != "" {
		s = strings.ReplaceAll(s, key, scrub.Redacted)
	}
	s = scrub.String(s)
	if len(s) > 500 {
		s = textcut.Prefix(s, 500) + "..."
	}
	return s
}

func usdToMicros(usd float64) int64 {
	return int64(math.Round(usd * models.MicrosPerUSD))
}

// ---- OpenAI: organization Costs API and Usage API (completions) ----

type openAIImporter struct {
	g    *getter
	base string
}

type openAIPage[T any] struct {
	Data []struct {
		StartTime int64 `json:"start_time"`
		EndTime   int64 `json:"end_time"`
		Results   []T   `json:"results"`
	} `json:"data"`
	HasMore  bool    `json:"has_more"`
	NextPage *string `json:"next_page"`
}

type openAICost struct {
	Amount *struct {
		Value    float64 `json:"value"`
		Currency string  `json:"currency"`
	} `json:"amount"`
	LineItem *string `json:"line_item"`
}

type openAIUsage struct {
	InputTokens       int64   `json:"input_tokens"`
	InputCachedTokens int64   `json:"input_cached_tokens"`
	OutputTokens      int64   `json:"output_tokens"`
	NumModelRequests  int64   `json:"num_model_requests"`
	Model             *string `json:"model"`
}

// openAIModel is the model of a Costs API line item: line items read
// "<model>, <input|output|cached input ...>".
func openAIModel(lineItem string) string {
	if i := strings.Index(lineItem, ", "); i > 0 {
		return lineItem[:i]
	}
	return lineItem
}

func (o *openAIImporter) importDay(ctx context.Context, day time.Time, _ string) ([]models.ProviderUsageLine, int, error) {
	q := url.Values{}
	q.Set("start_time", strconv.FormatInt(day.Unix(), 10))
	q.Set("end_time", strconv.FormatInt(day.AddDate(0, 0, 1).Unix(), 10))
	q.Set("bucket_width", "1d")
	q.Set("limit", "7")
	byKey := map[[2]string]*models.ProviderUsageLine{}
	var order [][2]string
	line := func(model, item string) *models.ProviderUsageLine {
		k := [2]string{model, item}
		if l, ok := byKey[k]; ok {
			return l
		}
		l := &models.ProviderUsageLine{Model: model, LineItem: item}
		byKey[k] = l
		order = append(order, k)
		return l
	}
	pages := 0
	costs := url.Values{"group_by": {"line_item"}}
	err := paginate(ctx, o.g, o.base+"/v1/organization/costs", q, costs, &pages, func(p *openAIPage[openAICost]) error {
		for _, b := range p.Data {
			for _, r := range b.Results {
				if r.Amount == nil {
					return &ExportError{Provider: o.g.provider, Message: "malformed answer: a cost result without amount"}
				}
				if r.Amount.Currency != "" && !strings.EqualFold(r.Amount.Currency, "usd") {
					return &ExportError{Provider: o.g.provider, Message: "unsupported currency " + r.Amount.Currency}
				}
				item := ""
				if r.LineItem != nil {
					item = *r.LineItem
				}
				line(openAIModel(item), item).CostMicros += usdToMicros(r.Amount.Value)
			}
		}
		return nil
	})
	if err != nil {
		return nil, pages, err
	}
	usage := url.Values{"group_by": {"model"}}
	err = paginate(ctx, o.g, o.base+"/v1/organization/usage/completions", q, usage, &pages, func(p *openAIPage[openAIUsage]) error {
		for _, b := range p.Data {
			for _, r := range b.Results {
				model := ""
				if r.Model != nil {
					model = *r.Model
				}
				l := line(model, "usage: completions")
				l.InputTokens += r.InputTokens
				l.CachedInputTokens += r.InputCachedTokens
				l.OutputTokens += r.OutputTokens
				l.Requests += r.NumModelRequests
			}
		}
		return nil
	})
	if err != nil {
		return nil, pages, err
	}
	out := make([]models.ProviderUsageLine, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out, pages, nil
}

// paginate GETs u with the query, then follows next_page while has_more,
// handing each decoded page to each.
func paginate[P any, PP interface {
	*P
	cursor() (bool, string)
}](ctx context.Context, g *getter, u string, base, extra url.Values, pages *int, each func(PP) error) error {
	cursor := ""
	for n := 0; ; n++ {
		if n == maxPages {
			return &ExportError{Provider: g.provider, Message: fmt.Sprintf("more than %d pages: the export does not end", maxPages)}
		}
		q := url.Values{}
		for k, v := range base {
			q[k] = v
		}
		for k, v := range extra {
			q[k] = v
		}
		if cursor != "" {
			q.Set("page", cursor)
		}
		p := PP(new(P))
		if err := g.get(ctx, u+"?"+q.Encode(), p); err != nil {
			return err
		}
		*pages++
		if err := each(p); err != nil {
			return err
		}
		more, next := p.cursor()
		if !more {
			return nil
		}
		if next == "" || next == cursor {
			return &ExportError{Provider: g.provider, Message: "malformed answer: has_more without a new next_page"}
		}
		cursor = next
	}
}

func (p *openAIPage[T]) cursor() (bool, string)    { return p.HasMore, deref(p.NextPage) }
func (p *anthropicPage[T]) cursor() (bool, string) { return p.HasMore, deref(p.NextPage) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ---- Anthropic: Admin API cost report and messages usage report ----

type anthropicImporter struct {
	g    *getter
	base string
}

type anthropicPage[T any] struct {
	Data []struct {
		StartingAt string `json:"starting_at"`
		EndingAt   string `json:"ending_at"`
		Results    []T    `json:"results"`
	} `json:"data"`
	HasMore  bool    `json:"has_more"`
	NextPage *string `json:"next_page"`
}

type anthropicCost struct {
	// Amount is a decimal string in the currency's lowest unit (cents).
	Amount      *string `json:"amount"`
	Currency    string  `json:"currency"`
	Description *string `json:"description"`
	CostType    *string `json:"cost_type"`
	Model       *string `json:"model"`
}

type anthropicUsage struct {
	UncachedInputTokens  int64 `json:"uncached_input_tokens"`
	CacheReadInputTokens int64 `json:"cache_read_input_tokens"`
	CacheCreation        struct {
		Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
		Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
	} `json:"cache_creation"`
	OutputTokens int64   `json:"output_tokens"`
	Model        *string `json:"model"`
}

func (a *anthropicImporter) importDay(ctx context.Context, day time.Time, _ string) ([]models.ProviderUsageLine, int, error) {
	q := url.Values{}
	q.Set("starting_at", day.Format(time.RFC3339))
	q.Set("ending_at", day.AddDate(0, 0, 1).Format(time.RFC3339))
	q.Set("bucket_width", "1d")
	q.Set("limit", "7")
	byKey := map[[2]string]*models.ProviderUsageLine{}
	var order [][2]string
	line := func(model, item string) *models.ProviderUsageLine {
		k := [2]string{model, item}
		if l, ok := byKey[k]; ok {
			return l
		}
		l := &models.ProviderUsageLine{Model: model, LineItem: item}
		byKey[k] = l
		order = append(order, k)
		return l
	}
	pages := 0
	err := paginate(ctx, a.g, a.base+"/v1/organizations/cost_report", q, url.Values{"group_by[]": {"description"}}, &pages,
		func(p *anthropicPage[anthropicCost]) error {
			for _, b := range p.Data {
				for _, r := range b.Results {
					if r.Amount == nil {
						return &ExportError{Provider: a.g.provider, Message: "malformed answer: a cost result without amount"}
					}
					if r.Currency != "" && !strings.EqualFold(r.Currency, "usd") {
						return &ExportError{Provider: a.g.provider, Message: "unsupported currency " + r.Currency}
					}
					cents, err := strconv.ParseFloat(*r.Amount, 64)
					if err != nil {
						return &ExportError{Provider: a.g.provider, Message: "malformed answer: amount " + strconv.Quote(*r.Amount) + " is not a decimal"}
					}
					item := deref(r.Description)
					if item == "" {
						item = deref(r.CostType)
					}
					// cents -> micro-dollars: 1 cent = 10,000 micros.
					line(deref(r.Model), item).CostMicros += int64(math.Round(cents * 10_000))
				}
			}
			return nil
		})
	if err != nil {
		return nil, pages, err
	}
	err = paginate(ctx, a.g, a.base+"/v1/organizations/usage_report/messages", q, url.Values{"group_by[]": {"model"}}, &pages,
		func(p *anthropicPage[anthropicUsage]) error {
			for _, b := range p.Data {
				for _, r := range b.Results {
					l := line(deref(r.Model), "usage: messages")
					created := r.CacheCreation.Ephemeral1h + r.CacheCreation.Ephemeral5m
					// Normalised like the ledger: input includes cached and cache-creation tokens.
					l.InputTokens += r.UncachedInputTokens + r.CacheReadInputTokens + created
					l.CachedInputTokens += r.CacheReadInputTokens
					l.CacheCreationTokens += created
					l.OutputTokens += r.OutputTokens
				}
			}
			return nil
		})
	if err != nil {
		return nil, pages, err
	}
	out := make([]models.ProviderUsageLine, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	return out, pages, nil
}

// newImporter builds the importer of a provider type.
func newImporter(id, typ, baseURL, organization, key string, client *http.Client) (importer, error) {
	base := strings.TrimRight(baseURL, "/")
	g := &getter{provider: id, client: client, key: key, headers: map[string]string{}}
	switch typ {
	case "openai":
		if base == "" {
			base = OpenAIBaseURL
		}
		base = strings.TrimSuffix(base, "/v1")
		g.headers["Authorization"] = "Bearer " + key
		if organization != "" {
			g.headers["OpenAI-Organization"] = organization
		}
		return &openAIImporter{g: g, base: base}, nil
	case "anthropic":
		if base == "" {
			base = AnthropicBaseURL
		}
		base = strings.TrimSuffix(base, "/v1")
		g.headers["x-api-key"] = key
		g.headers["anthropic-version"] = "2023-06-01"
		return &anthropicImporter{g: g, base: base}, nil
	}
	return nil, errors.New("unknown type " + strconv.Quote(typ) + " (use openai or anthropic)")
}
