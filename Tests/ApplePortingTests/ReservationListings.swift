import Earshot // was: import Speech

// The asset ladder of Apple's iOS 26 sample (000 §3.3, §5.3) and the guide's locale switch with
// checked rollback (000 §5.4). Changed for Earshot: the import line only. The sample's methods
// live on its `Transcription` class; this one holds just what they touch.

final class Transcription: @unchecked Sendable {
    var downloadProgress: Progress?

    func supported(locale: Locale) async -> Bool {
        let supported = await SpeechTranscriber.supportedLocales
        return supported.map { $0.identifier(.bcp47) }.contains(locale.identifier(.bcp47))
    }

    func installed(locale: Locale) async -> Bool {
        let installed = await Set(SpeechTranscriber.installedLocales)
        return installed.map { $0.identifier(.bcp47) }.contains(locale.identifier(.bcp47))
    }

    public func ensureModel(transcriber: SpeechTranscriber, locale: Locale) async throws {
        guard await supported(locale: locale) else {
            throw TranscriptionSetupError.localeNotSupported(locale)
        }
        if await installed(locale: locale) {
            return
        } else {
            try await downloadIfNeeded(for: transcriber)
        }
    }

    func downloadIfNeeded(for module: SpeechTranscriber) async throws {
        if let downloader = try await AssetInventory.assetInstallationRequest(supporting: [module]) {
            self.downloadProgress = downloader.progress
            try await downloader.downloadAndInstall()
        }
    }

    func releaseLocales() async {
        let reserved = await AssetInventory.reservedLocales
        for locale in reserved {
            await AssetInventory.release(reservedLocale: locale)
        }
    }
}

/// Switch transcription locale with checked rollback when installation fails.
func switchLocale(to newLocale: Locale, currentlyReserved: Locale?) async throws {
    guard let matched = await DictationTranscriber.supportedLocale(equivalentTo: newLocale) else {
        throw TranscriptionSetupError.localeNotSupported(newLocale)
    }
    let newIdentifier = matched.identifier(.bcp47)
    if currentlyReserved?.identifier(.bcp47) == newIdentifier { return }

    let probe = DictationTranscriber(locale: matched, preset: .progressiveLongDictation)
    let reservationsBeforeSwitch = await AssetInventory.reservedLocales
    let matchedWasAlreadyReserved = reservationsBeforeSwitch.contains {
        $0.identifier(.bcp47) == newIdentifier
    }
    let releasedPrevious: Bool
    if let currentlyReserved {
        releasedPrevious = await AssetInventory.release(reservedLocale: currentlyReserved)
    } else {
        releasedPrevious = false
    }

    do {
        if let request = try await AssetInventory.assetInstallationRequest(supporting: [probe]) {
            try await request.downloadAndInstall()
        }
    } catch {
        let installationError = error
        let reservationsAfterFailure = await AssetInventory.reservedLocales
        let matchedIsNowReserved = reservationsAfterFailure.contains {
            $0.identifier(.bcp47) == newIdentifier
        }
        if !matchedWasAlreadyReserved && matchedIsNowReserved {
            await AssetInventory.release(reservedLocale: matched)
        }
        if let currentlyReserved, releasedPrevious {
            do {
                _ = try await AssetInventory.reserve(locale: currentlyReserved)
            } catch {
                throw TranscriptionSetupError.couldNotRestorePreviousLocale(currentlyReserved)
            }
            let restoredReservations = await AssetInventory.reservedLocales
            guard restoredReservations.contains(where: {
                $0.identifier(.bcp47) == currentlyReserved.identifier(.bcp47)
            }) else {
                throw TranscriptionSetupError.couldNotRestorePreviousLocale(currentlyReserved)
            }
        }
        throw installationError
    }
}

enum TranscriptionSetupError: Error {
    case localeNotSupported(Locale)
    case couldNotRestorePreviousLocale(Locale)
    case couldNotCaptureMicrophone
    case micPermissionDenied
}
