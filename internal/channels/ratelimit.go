package channels

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiter paces one bot's sends to the platform's published limits: a
// least interval per chat, a per-minute budget per group, a rate for the
// whole bot, and a pause for everything after the platform answered 429
// for the whole bot. It is per process: gateways sharing a bot each pace
// their own sends (docs/channels.md), and a 429 that still comes is
// honoured through the send activity's retry delay.
type Limiter struct {
	limits Limits
	bot    *rate.Limiter

	mu          sync.Mutex
	chats       map[string]*chatPace
	pausedUntil time.Time
	lastSweep   time.Time
}

type chatPace struct {
	chat, group *rate.Limiter
	used        time.Time
}

// NewLimiter paces sends to l.
func NewLimiter(l Limits) *Limiter {
	lim := &Limiter{limits: l, chats: map[string]*chatPace{}}
	if l.PerBotPerSecond > 0 {
		lim.bot = rate.NewLimiter(rate.Limit(l.PerBotPerSecond), max(1, int(l.PerBotPerSecond)))
	}
	return lim
}

// Wait blocks until a message may go to chat (group: a group chat), or ctx
// ends.
func (l *Limiter) Wait(ctx context.Context, chat string, group bool) error {
	for {
		l.mu.Lock()
		pause := time.Until(l.pausedUntil)
		l.mu.Unlock()
		if pause <= 0 {
			break
		}
		if err := sleep(ctx, pause); err != nil {
			return err
		}
	}
	p := l.pace(chat)
	if p.chat != nil {
		if err := p.chat.Wait(ctx); err != nil {
			return err
		}
	}
	if group && p.group != nil {
		if err := p.group.Wait(ctx); err != nil {
			return err
		}
	}
	if l.bot != nil {
		return l.bot.Wait(ctx)
	}
	return nil
}

// Pause holds every send of the bot for d (a platform 429 for the bot).
func (l *Limiter) Pause(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := time.Now().Add(d); until.After(l.pausedUntil) {
		l.pausedUntil = until
	}
}

func (l *Limiter) pace(chat string) *chatPace {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Sub(l.lastSweep) > 10*time.Minute {
		// Chats idle for ten minutes have full budgets again: forget them
		// so the map does not grow with every chat ever seen.
		for k, p := range l.chats {
			if now.Sub(p.used) > 10*time.Minute {
				delete(l.chats, k)
			}
		}
		l.lastSweep = now
	}
	p, ok := l.chats[chat]
	if !ok {
		p = &chatPace{}
		if l.limits.PerChat > 0 {
			p.chat = rate.NewLimiter(rate.Every(l.limits.PerChat), 1)
		}
		if n := l.limits.GroupPerMinute; n > 0 {
			p.group = rate.NewLimiter(rate.Every(time.Minute/time.Duration(n)), max(1, n/4))
		}
		l.chats[chat] = p
	}
	p.used = now
	return p
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
