/// Earshot's release version, reported by every binary and in `earshot.welcome`.
public enum EarshotVersion {
    public static let string = "0.1.0"
}
