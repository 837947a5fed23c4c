package delivery

import (
	"encoding/json"

	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// The one builder of the Delivery workflow's input (workflows.DeliveryInput)
// and of its record (table deliveries). Every outbound message is built
// here, whoever queues it: POST /channels/{id}/messages (Service.Send),
// event hooks (Hooks.Deliver), a scheduled agent's output and an
// asynchronous webhook run's reply (activities). The input is a wire
// format: it rides in workflow histories and in the outbox column.

// ChannelInput is the input of a channel message's Delivery workflow: the
// body sent (and signed) on every attempt is m as JSON; the retry bounds
// get their defaults.
func ChannelInput(m ChannelMessage, retry workflows.DeliveryRetry) (workflows.DeliveryInput, error) {
	// Every channel but the webhook is a messaging channel (Check let it
	// through): its message goes to the chat named by To.
	return newInput(workflows.DeliveryInput{DeliveryID: m.DeliveryID, Channel: m.Channel, To: m.To, Source: m.Source, AgentID: m.AgentID,
		Messaging: m.Channel != ChannelWebhook}, m, retry)
}

// HookInput is the input of the Delivery workflow that sends event ev to
// an event hook under delivery id id (HookDeliveryID).
func HookInput(id string, hook Hook, ev models.Event, retry workflows.DeliveryRetry) (workflows.DeliveryInput, error) {
	return newInput(workflows.DeliveryInput{DeliveryID: id, Channel: HookChannelPrefix + hook.Key,
		Hook: &workflows.HookTarget{URL: hook.URL, SecretEnv: hook.SecretEnv}, Source: SourceHook, AgentID: ev.AgentID},
		HookBody{DeliveryID: id, Type: ev.Type, Event: ev}, retry)
}

func newInput(in workflows.DeliveryInput, body any, retry workflows.DeliveryRetry) (workflows.DeliveryInput, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return workflows.DeliveryInput{}, err
	}
	in.Version, in.Body, in.Retry = workflows.DeliveryInputVersion, string(b), retry.WithDefaults()
	return in, nil
}

// Record is the deliveries row of msg, pending, with the destination dest
// as shown to people (DisplayURL: no credentials, no query). Its outbox
// entry (StartInput) is left to the caller: only a message whose workflow
// this process starts itself needs one.
func Record(msg workflows.DeliveryInput, dest string) *models.Delivery {
	target := DisplayURL(dest)
	if msg.Messaging {
		target = dest // "chat:<id>"
	}
	return &models.Delivery{ID: msg.DeliveryID, Channel: msg.Channel, Source: msg.Source, AgentID: msg.AgentID,
		Target: target, WorkflowID: workflows.DeliveryWorkflowID(msg.DeliveryID)}
}
