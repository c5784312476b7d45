//! Messages waiting for the broker: a bounded queue that drops its oldest when full, so
//! that a broker away for hours costs a fixed amount of memory and the newest states
//! are the ones delivered.

use std::collections::VecDeque;

/// One message to publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Message {
    pub topic: String,
    pub payload: String,
    pub retain: bool,
}

impl Message {
    pub fn retained(topic: String, payload: impl Into<String>) -> Message {
        Message {
            topic,
            payload: payload.into(),
            retain: true,
        }
    }

    /// A message that is news, not a state: a subscriber that comes later does not get it.
    pub fn event(topic: String, payload: impl Into<String>) -> Message {
        Message {
            topic,
            payload: payload.into(),
            retain: false,
        }
    }
}

pub(super) struct Outbox {
    queue: VecDeque<Message>,
    capacity: usize,
}

impl Outbox {
    pub fn new(capacity: usize) -> Outbox {
        Outbox {
            queue: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Queues `message`; the oldest message dropped to make room, if one was.
    pub fn push(&mut self, message: Message) -> Option<Message> {
        let dropped = (self.queue.len() >= self.capacity)
            .then(|| self.queue.pop_front())
            .flatten();
        self.queue.push_back(message);
        dropped
    }

    /// Puts a message in front of the others: one that could not be handed over, or a
    /// connection's first ones (`online`, the discovery configs), which may take the queue
    /// past its capacity by their number.
    pub fn put_back(&mut self, message: Message) {
        self.queue.push_front(message);
    }

    pub fn pop(&mut self) -> Option<Message> {
        self.queue.pop_front()
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(i: usize) -> Message {
        Message::retained(format!("t/{i}"), i.to_string())
    }

    #[test]
    fn the_oldest_is_dropped_when_full() {
        let mut outbox = Outbox::new(3);
        let dropped: Vec<_> = (0..5).filter_map(|i| outbox.push(m(i))).collect();
        assert_eq!(dropped, [m(0), m(1)]);
        assert_eq!(outbox.len(), 3);
        outbox.put_back(m(9));
        let left: Vec<_> = std::iter::from_fn(|| outbox.pop()).collect();
        assert_eq!(left, [m(9), m(2), m(3), m(4)]);
    }
}
