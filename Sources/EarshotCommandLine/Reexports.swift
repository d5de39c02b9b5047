/// Transcript output is part of every CLI's vocabulary.
@_exported import EarshotTranscript
