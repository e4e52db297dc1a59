/// The words of the action pages in one language (`ActionPages`). Values are plain text: the
/// template escapes them.
struct ActionText: Sendable {
    var newPassword: String
    var confirmPassword: String
    /// Title, paragraphs and button of the form of each mode (the `GET` page).
    var prompt: [ActionPages.Mode: (title: String, paragraphs: [String], submit: String)]
    /// Title and paragraphs after each mode succeeded; `{email}` is the account's address.
    var done: [ActionPages.Mode: (title: String, paragraphs: [String])]
    /// A code the identity service refused, per mode: what to do next.
    var codeRefused: [ActionPages.Mode: String]
    var codeRefusedTitle: String
    var incompleteTitle: String
    var incomplete: String
    var mismatch: String
    var emptyPassword: String
    var tooLong: String
    var weakPassword: String
    /// `weak_password` reasons in words; an unknown reason is left out.
    var reasons: [String: String]
    var rateLimitedTitle: String
    /// `{seconds}` is `Retry-After`.
    var rateLimited: String
    var unavailableTitle: String
    var unavailable: String
    var emailTaken: String
    var disabled: String
    var formUnreadable: String
    var failedTitle: String
    var failed: String

    static func of(_ language: ActionPages.Language) -> ActionText {
        switch language {
        case .en: english
        case .ja: japanese
        }
    }

    static let english = ActionText(
        newPassword: "New password",
        confirmPassword: "New password again",
        prompt: [
            .resetPassword: ("Choose a new password", ["Enter your new password twice. Every device signed in to your account will be signed out."], "Change password"),
            .verifyEmail: ("Verify your email address", ["Press the button to confirm that this email address belongs to you."], "Verify email address"),
            .verifyAndChangeEmail: ("Confirm your new email address", ["Press the button to make this address the email address of your account."], "Confirm new address"),
            .recoverEmail: (
                "Undo the email address change",
                ["Press the button to put back your previous email address. Every device signed in to your account will be signed out, and your password will stop working: a mail to set a new one will follow."],
                "Restore my previous address"),
        ],
        done: [
            .resetPassword: ("Your password has been changed", ["Sign in with your new password. Every device that was signed in has been signed out."]),
            .verifyEmail: ("Your email address is verified", ["Thank you. You can close this page and return to the app."]),
            .verifyAndChangeEmail: ("Your email address has been changed", ["Your account now uses {email}. You can close this page."]),
            .recoverEmail: (
                "Your previous email address is back",
                [
                    "Your account uses {email} again, and every device has been signed out.",
                    "Your password no longer works: we sent {email} a mail to set a new one (whoever changed the address may know the old one).",
                ]),
        ],
        codeRefused: [
            .resetPassword: "This link is expired, already used, or replaced by a newer one. Ask for a new password reset mail.",
            .verifyEmail: "This link is expired, already used, or for an address your account no longer has. Ask for a new verification mail.",
            .verifyAndChangeEmail: "This link is expired, already used, or replaced by a newer change. Change your email address again to get a new mail.",
            .recoverEmail: "This link is expired or already used. If someone else changed your address, contact support.",
        ],
        codeRefusedTitle: "This link no longer works",
        incompleteTitle: "This link is incomplete",
        incomplete: "Part of the link is missing. Open the link from the mail again; if your mail program broke it in two, copy all of it into the address bar.",
        mismatch: "The two passwords are not the same. Enter the new password twice.",
        emptyPassword: "Enter a new password.",
        tooLong: "This password is too long.",
        weakPassword: "Choose another password:",
        reasons: [
            "empty": "Enter a password.",
            "too_short": "It is too short.",
            "too_long": "It is too long.",
            "common_password": "It is one of the most common passwords.",
            "matches_email": "It is the same as your email address.",
            "invalid_characters": "It contains characters that cannot be used.",
        ],
        rateLimitedTitle: "Too many attempts",
        rateLimited: "Wait {seconds} seconds, then try again.",
        unavailableTitle: "Please try again",
        unavailable: "The service is busy or unavailable right now. Wait a moment, then try again.",
        emailTaken: "This email address is now used by another account, so the change cannot be made.",
        disabled: "This account is disabled.",
        formUnreadable: "The form could not be read. Open the link from the mail again.",
        failedTitle: "Something went wrong",
        failed: "Nothing was changed. Try again later.")

    static let japanese = ActionText(
        newPassword: "新しいパスワード",
        confirmPassword: "新しいパスワード（確認）",
        prompt: [
            .resetPassword: ("新しいパスワードの設定", ["新しいパスワードを 2 回入力してください。ログイン中のすべての端末からログアウトされます。"], "パスワードを変更"),
            .verifyEmail: ("メールアドレスの確認", ["このメールアドレスがご本人のものであることを確認するには、ボタンを押してください。"], "メールアドレスを確認"),
            .verifyAndChangeEmail: ("新しいメールアドレスの確認", ["このアドレスをアカウントのメールアドレスにするには、ボタンを押してください。"], "新しいアドレスを確定"),
            .recoverEmail: ("メールアドレス変更の取り消し", ["以前のメールアドレスに戻すには、ボタンを押してください。ログイン中のすべての端末からログアウトされ、現在のパスワードは使えなくなります。新しいパスワードを設定するメールをお送りします。"], "以前のアドレスに戻す"),
        ],
        done: [
            .resetPassword: ("パスワードを変更しました", ["新しいパスワードでログインしてください。ログイン中だったすべての端末はログアウトされました。"]),
            .verifyEmail: ("メールアドレスを確認しました", ["ありがとうございます。このページを閉じてアプリに戻ってください。"]),
            .verifyAndChangeEmail: ("メールアドレスを変更しました", ["アカウントのメールアドレスは {email} になりました。このページは閉じてかまいません。"]),
            .recoverEmail: (
                "以前のメールアドレスに戻しました",
                [
                    "アカウントのメールアドレスは再び {email} になり、すべての端末がログアウトされました。",
                    "現在のパスワードは使えなくなりました。新しいパスワードを設定するメールを {email} にお送りしました(アドレスを変更した人が以前のパスワードを知っているおそれがあります)。",
                ]),
        ],
        codeRefused: [
            .resetPassword: "このリンクは期限切れ、使用済み、または新しいリンクに置き換えられています。パスワード再設定のメールをもう一度お申し込みください。",
            .verifyEmail: "このリンクは期限切れ、使用済み、またはアカウントの現在のアドレス宛てではありません。確認メールをもう一度お申し込みください。",
            .verifyAndChangeEmail: "このリンクは期限切れ、使用済み、または新しい変更に置き換えられています。もう一度メールアドレスを変更してください。",
            .recoverEmail: "このリンクは期限切れか使用済みです。ご自身以外がアドレスを変更した場合は、サポートにご連絡ください。",
        ],
        codeRefusedTitle: "このリンクは使えません",
        incompleteTitle: "リンクが不完全です",
        incomplete: "リンクの一部が欠けています。メールのリンクをもう一度開いてください。途中で改行されている場合は、全体をアドレスバーに貼り付けてください。",
        mismatch: "2 つのパスワードが一致しません。新しいパスワードを 2 回入力してください。",
        emptyPassword: "新しいパスワードを入力してください。",
        tooLong: "パスワードが長すぎます。",
        weakPassword: "別のパスワードを選んでください:",
        reasons: [
            "empty": "パスワードを入力してください。",
            "too_short": "短すぎます。",
            "too_long": "長すぎます。",
            "common_password": "よく使われるパスワードです。",
            "matches_email": "メールアドレスと同じです。",
            "invalid_characters": "使用できない文字が含まれています。",
        ],
        rateLimitedTitle: "試行回数が多すぎます",
        rateLimited: "{seconds} 秒待ってから、もう一度お試しください。",
        unavailableTitle: "もう一度お試しください",
        unavailable: "ただいまサービスが混み合っているか、利用できません。少し待ってから、もう一度お試しください。",
        emailTaken: "このメールアドレスは現在ほかのアカウントで使われているため、変更できません。",
        disabled: "このアカウントは無効になっています。",
        formUnreadable: "フォームを読み取れませんでした。メールのリンクをもう一度開いてください。",
        failedTitle: "問題が発生しました",
        failed: "何も変更されていません。しばらくしてから、もう一度お試しください。")
}
