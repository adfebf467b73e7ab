/// Splits a stream of generated token ids into reasoning and response text: the ids between
/// the reasoning markers' open and close tokens (Gemma 4's `<|channel>` 100 … `<channel|>` 101,
/// `<think>` … `</think>`) are reasoning, the others the response. The markers themselves are
/// dropped, and so is the channel label right after the open token (`thought\n`), newlines at
/// the end of a span and newlines that start the response after a span (`</think>\n\n`, as
/// Qwen's and DeepSeek's templates strip them). Each channel is decoded by its own
/// `StreamingDecoder`, so text arrives whole characters at a time.
///
/// The concatenation of the `.reasoning` pieces equals `reasoning`, of the `.response` pieces
/// `response`.
public struct ReasoningRouter {
    public enum Channel: Equatable, Sendable { case reasoning, response }

    public let openId: Int
    public let closeId: Int
    public let label: String
    /// Whether the next id belongs to a reasoning span.
    public private(set) var inReasoning: Bool
    /// Everything routed so far.
    public private(set) var reasoning = ""
    public private(set) var response = ""
    /// Whether any reasoning span was opened.
    public private(set) var sawReasoning: Bool

    private var reasoningDecoder: StreamingDecoder
    private var responseDecoder: StreamingDecoder
    /// Reasoning text held while it could still be the start of the label.
    private var labelHold = ""
    private var labelPending = false
    /// Newlines at the current end of the reasoning, held until more reasoning follows.
    private var heldNewlines = ""
    /// Newlines starting the response right after a span are dropped.
    private var afterSpan = false

    /// Nil when the tokenizer does not have both markers as tokens.
    /// - Parameter startInReasoning: the prompt ended inside an open span (`ChatTemplate.promptOpensReasoning`).
    public init?(tokenizer: Tokenizer, markers: ReasoningMarkers, startInReasoning: Bool = false) {
        guard let o = tokenizer.tokenToId(markers.open), let c = tokenizer.tokenToId(markers.close) else { return nil }
        openId = o
        closeId = c
        label = markers.label
        inReasoning = startInReasoning
        sawReasoning = startInReasoning
        labelPending = startInReasoning && !markers.label.isEmpty
        reasoningDecoder = tokenizer.streamingDecoder(skipSpecialTokens: true)
        responseDecoder = tokenizer.streamingDecoder(skipSpecialTokens: true)
    }

    /// Routes one id; returns the text pieces it completes (possibly none).
    public mutating func push(_ id: Int) -> [(Channel, String)] {
        var out: [(Channel, String)] = []
        if id == openId && !inReasoning {
            out += flush(.response, responseDecoder.finish())
            inReasoning = true
            sawReasoning = true
            labelPending = !label.isEmpty
            labelHold = ""
            return out
        }
        if id == closeId && inReasoning {
            out += flush(.reasoning, reasoningDecoder.finish())
            out += flushLabel()
            inReasoning = false
            heldNewlines = ""
            afterSpan = true
            return out
        }
        if inReasoning {
            out += flush(.reasoning, reasoningDecoder.push(id))
        } else {
            out += flush(.response, responseDecoder.push(id))
        }
        return out
    }

    /// Ends the stream: text still held back in either channel.
    public mutating func finish() -> [(Channel, String)] {
        var out = flush(.reasoning, reasoningDecoder.finish())
        out += flushLabel()
        out += flush(.response, responseDecoder.finish())
        return out
    }

    private mutating func flushLabel() -> [(Channel, String)] {
        guard labelPending else { return [] }
        labelPending = false
        let held = labelHold
        labelHold = ""
        return emit(.reasoning, held)
    }

    private mutating func flush(_ channel: Channel, _ text: String) -> [(Channel, String)] {
        guard !text.isEmpty else { return [] }
        guard channel == .reasoning, labelPending else { return emit(channel, text) }
        labelHold += text
        let h = Array(labelHold.unicodeScalars), l = Array(label.unicodeScalars)
        if h.count >= l.count {
            labelPending = false
            let rest = h.prefix(l.count).elementsEqual(l) ? h.dropFirst(l.count) : h[...]
            labelHold = ""
            var v = String.UnicodeScalarView()
            v.append(contentsOf: rest)
            return emit(.reasoning, String(v))
        }
        if l.prefix(h.count).elementsEqual(h) { return [] }  // could still be the label
        return flushLabel()  // not the label: what was held is reasoning text
    }

    private mutating func emit(_ channel: Channel, _ text: String) -> [(Channel, String)] {
        guard !text.isEmpty else { return [] }
        var t = text.unicodeScalars[...]
        if channel == .reasoning {
            var all = String.UnicodeScalarView(heldNewlines.unicodeScalars)
            all.append(contentsOf: t)
            var cut = all.endIndex
            while cut > all.startIndex, all[all.index(before: cut)] == "\n" { cut = all.index(before: cut) }
            heldNewlines = String(String.UnicodeScalarView(all[cut...]))
            let piece = String(String.UnicodeScalarView(all[..<cut]))
            guard !piece.isEmpty else { return [] }
            reasoning += piece
            return [(.reasoning, piece)]
        }
        if afterSpan {
            t = t.drop { $0 == "\n" }
            if t.isEmpty { return [] }
            afterSpan = false
        }
        let piece = String(String.UnicodeScalarView(t))
        response += piece
        return [(.response, piece)]
    }
}
