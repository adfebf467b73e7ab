import Foundation

/// Foundation file errors (`CocoaError`, POSIX errors) as `path: reason` text, instead of the
/// raw `The operation could not be completed. (NSCocoaErrorDomain error 4.)`.
public enum FileErrorText {
    /// `path: reason` for a Foundation file error, or nil for any other error.
    public static func describe(_ error: Error) -> String? {
        let ns = error as NSError
        guard ns.domain == NSCocoaErrorDomain || ns.domain == NSPOSIXErrorDomain else { return nil }
        let path = (ns.userInfo[NSFilePathErrorKey] as? String) ?? (ns.userInfo[NSURLErrorKey] as? URL)?.path
        var reason: String
        if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            reason = String(cString: strerror(Int32(underlying.code)))
        } else if ns.domain == NSPOSIXErrorDomain {
            reason = String(cString: strerror(Int32(ns.code)))
        } else {
            reason = cocoaReason(ns.code)
        }
        reason = reason.prefix(1).lowercased() + reason.dropFirst()
        return path.map { "\($0): \(reason)" } ?? reason
    }

    /// Like ``describe(_:)``, falling back to the error's own text.
    public static func text(_ error: Error) -> String { describe(error) ?? String(describing: error) }

    static func cocoaReason(_ code: Int) -> String {
        switch code {
        case 4, 260: return "no such file or folder"
        case 257, 513: return "permission denied"
        case 516: return "a file or folder already exists there"
        case 640: return "no space left on the device"
        case 642: return "the volume is read-only"
        case 259, 264: return "the file's contents are not in the expected format"
        default: return "the file operation failed (Cocoa code \(code))"
        }
    }
}
