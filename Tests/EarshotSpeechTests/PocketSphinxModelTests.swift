import EarshotSpeech
import Foundation
import Testing
import TestSupport

@Suite(.enabled(if: EmbeddedModels.runs(PocketSphinxFixtures.available), "needs Debian pocketsphinx-en-us"))
struct PocketSphinxModelTests {
    /// A copy of the Debian model made of symlinks, in Earshot's asset layout.
    static func assetCopy() throws -> TempDirectory {
        let directory = try TempDirectory("ps")
        let files = FileManager.default
        try files.createDirectory(atPath: directory.file("acoustic"), withIntermediateDirectories: true)
        for name in try files.contentsOfDirectory(atPath: PocketSphinxFixtures.acousticModel) {
            try files.createSymbolicLink(atPath: directory.file("acoustic/\(name)"), withDestinationPath: PocketSphinxFixtures.acousticModel + "/" + name)
        }
        try files.createSymbolicLink(atPath: directory.file("language-model.lm.bin"), withDestinationPath: PocketSphinxFixtures.languageModel)
        try files.createSymbolicLink(atPath: directory.file("dictionary.dict"), withDestinationPath: PocketSphinxFixtures.dictionary)
        return directory
    }

    @Test func argumentsKeepEveryFrameAndThePhoneSetIsRead() throws {
        let model = try PocketSphinxFixtures.model(.init(additionalArguments: ["-beam": "1e-50"]))
        let pairs = Dictionary(uniqueKeysWithValues: stride(from: 0, to: model.arguments.count - 1, by: 2).map { (model.arguments[$0], model.arguments[$0 + 1]) })
        #expect(pairs["-remove_silence"] == "no")
        #expect(pairs["-samprate"] == "16000")
        #expect(pairs["-bestpath"] == "yes")
        #expect(pairs["-beam"] == "1e-50")
        #expect(pairs["-logfn"] == nil)
        let phones = try #require(model.phones)
        #expect(phones.count == 42)
        #expect(phones.isSuperset(of: ["AA", "ZH", "SIL", "+NSN+"]))
    }

    @Test func reservedOrMalformedOptionsAreRefused() {
        for arguments in [["-remove_silence": "yes"], ["-logfn": "/dev/null"], ["beam": "1e-50"]] {
            #expect(throws: PocketSphinxError.self) { try PocketSphinxFixtures.model(.init(additionalArguments: arguments)) }
        }
        #expect(throws: PocketSphinxError.self) { try PocketSphinxFixtures.model(.init(nBestSearchLimit: 0)) }
    }

    @Test func theAssetLayoutLoads() throws {
        let directory = try Self.assetCopy()
        defer { directory.remove() }
        let model = try PocketSphinxModel(assetDirectory: directory.path)
        #expect(model.acousticModel == directory.file("acoustic"))
        #expect(model.phones?.count == 42)
    }

    @Test func aMissingFileIsNamed() throws {
        let directory = try Self.assetCopy()
        defer { directory.remove() }
        let files = FileManager.default
        let model = try PocketSphinxModel(assetDirectory: directory.path)

        try files.removeItem(atPath: directory.file("acoustic/mdef"))
        #expect(throws: PocketSphinxError.missingModelFile(.acousticModel, path: directory.file("acoustic/mdef"))) {
            try PocketSphinxModel(assetDirectory: directory.path)
        }
        // A decoder checks again: the files may have gone since the model was described.
        #expect(throws: PocketSphinxError.missingModelFile(.acousticModel, path: directory.file("acoustic/mdef"))) {
            try PocketSphinxDecoder(model: model)
        }
        try files.removeItem(atPath: directory.file("language-model.lm.bin"))
        try files.removeItem(atPath: directory.file("dictionary.dict"))
        #expect(throws: PocketSphinxError.missingModelFile(.languageModel, path: PocketSphinxFixtures.modelDirectory + "/nope.lm.bin")) {
            try PocketSphinxModel(acousticModel: PocketSphinxFixtures.acousticModel, languageModel: PocketSphinxFixtures.modelDirectory + "/nope.lm.bin",
                                  dictionary: PocketSphinxFixtures.dictionary)
        }
        #expect(throws: PocketSphinxError.missingModelFile(.dictionary, path: directory.file("dictionary.dict"))) {
            try PocketSphinxModel(acousticModel: PocketSphinxFixtures.acousticModel, languageModel: PocketSphinxFixtures.languageModel,
                                  dictionary: directory.file("dictionary.dict"))
        }
        #expect(throws: PocketSphinxError.missingModelFile(.acousticModel, path: directory.file("nothing"))) {
            try PocketSphinxModel(acousticModel: directory.file("nothing"), languageModel: PocketSphinxFixtures.languageModel,
                                  dictionary: PocketSphinxFixtures.dictionary)
        }
    }
}
