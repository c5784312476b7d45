//! Why a frame was lost before the pipeline saw it: the sources (`capture`) say so, the
//! camera's metrics count it by [`DropReason::name`], and the HTTP side reads the counts
//! (`mailbox::Activity`). Here, below all three, so that none imports another for it.

/// Why a frame was lost before the pipeline saw it; a metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// A gap in the sequence numbers: the source moved on before it was asked again.
    SequenceGap,
    /// The driver flagged the buffer as damaged (`V4L2_BUF_FLAG_ERROR`).
    BufferError,
    /// The buffer held fewer bytes than the frame needs; for a replay file, the frame
    /// could not be read whole (the file shrank, or a read failed).
    ShortFrame,
    /// An image of a replay directory was missing, unreadable, incomplete or of another
    /// size or format than the first.
    BadImage,
    /// A JPEG frame (an MJPEG camera's or recording's) that is not a whole, undamaged
    /// image of the stream's size: cut short by a starved USB bus, damaged, or of
    /// another size. Never processed in part.
    CorruptFrame,
}

impl DropReason {
    /// Every reason, in the order the metrics list them; `reason as usize` indexes it.
    pub const ALL: [DropReason; 5] = [
        DropReason::SequenceGap,
        DropReason::BufferError,
        DropReason::ShortFrame,
        DropReason::BadImage,
        DropReason::CorruptFrame,
    ];

    /// The `reason` label the metrics count the drop under (`sequence_gap`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DropReason::SequenceGap => "sequence_gap",
            DropReason::BufferError => "buffer_error",
            DropReason::ShortFrame => "short_frame",
            DropReason::BadImage => "bad_image",
            DropReason::CorruptFrame => "corrupt_frame",
        }
    }
}
