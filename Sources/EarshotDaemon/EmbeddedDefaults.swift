/// Where `Scripts/setup.sh` puts the embedded default catalog (signed with a key generated on this
/// machine) and the key the daemon trusts for it.
public enum EmbeddedDefaults {
    public static let directory = "/usr/local/share/earshot"
    public static let catalogURL = "file://\(directory)/catalog/catalog.json"
    public static let keysDirectory = "\(directory)/keys"
}
